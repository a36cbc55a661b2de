#!/usr/bin/env python3
"""kustomize_lite.py — renders the kustomizations of deploy/ the way
`kubectl kustomize` does, for the validator on machines without kubectl.

It knows what deploy/ uses and refuses the rest: `resources` (files, or
directories holding a kustomization.yaml) and `patches` given by `path`,
each a strategic merge patch of one object found by kind and name. The
merge is Kubernetes': maps merge key by key; the lists below merge their
items by the key named (the patch's items first, in its order, merged
into the base's items of the same key; then the base's other items, as
kustomize orders them), every other list is replaced; null deletes a key.

    python3 kustomize_lite.py DIR      prints the objects as YAML documents;
                                       where kubectl is installed, exit 1 unless
                                       `kubectl kustomize DIR` gives the same ones
"""
import os
import shutil
import subprocess
import sys

import yaml

# patchMergeKey of the lists a pod template has (k8s.io/api core/v1)
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
}
KNOWN = {"apiVersion", "kind", "resources", "patches"}


class Unsupported(Exception):
    pass


def merge(base, patch, key=None):
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            if v is None:
                out.pop(k, None)
            elif k in out:
                out[k] = merge(out[k], v, k)
            else:
                out[k] = v
        return out
    if isinstance(base, list) and isinstance(patch, list) and key in MERGE_KEYS:
        mk = MERGE_KEYS[key]
        byk = {b.get(mk): b for b in base if isinstance(b, dict)}
        out = [merge(byk[p.get(mk)], p) if p.get(mk) in byk else p for p in patch]
        keys = {p.get(mk) for p in patch}
        return out + [b for b in base if not (isinstance(b, dict) and b.get(mk) in keys)]
    return patch


def render(d):
    with open(os.path.join(d, "kustomization.yaml")) as fh:
        k = yaml.safe_load(fh)
    extra = set(k) - KNOWN
    if extra:
        raise Unsupported("%s: kustomization fields %s" % (d, sorted(extra)))
    objs = []
    for r in k.get("resources", []):
        p = os.path.normpath(os.path.join(d, r))
        if os.path.isdir(p):
            objs += render(p)
        else:
            with open(p) as fh:
                objs += [o for o in yaml.safe_load_all(fh) if o]
    for pt in k.get("patches", []):
        if set(pt) != {"path"}:
            raise Unsupported("%s: a patch other than {path: FILE}" % d)
        with open(os.path.join(d, pt["path"])) as fh:
            for p in (o for o in yaml.safe_load_all(fh) if o):
                md = p.get("metadata", {})
                at = [i for i, o in enumerate(objs) if o.get("kind") == p.get("kind") and
                      o.get("metadata", {}).get("name") == md.get("name") and
                      o.get("metadata", {}).get("namespace") == md.get("namespace")]
                if len(at) != 1:
                    raise Unsupported("%s: patch of %s %s matches %d objects" %
                                      (d, p.get("kind"), md.get("name"), len(at)))
                objs[at[0]] = merge(objs[at[0]], p)
    return objs


def kubectl_render(d):
    """`kubectl kustomize d`'s objects, or None where kubectl is not
    installed; Unsupported when kubectl refuses d."""
    if not shutil.which("kubectl"):
        return None
    r = subprocess.run(["kubectl", "kustomize", d], capture_output=True, text=True)
    if r.returncode:
        raise Unsupported("kubectl kustomize %s: %s" % (d, r.stderr.strip()))
    return [o for o in yaml.safe_load_all(r.stdout) if o]


def by_name(objs):
    return sorted(objs, key=lambda o: (o.get("kind", ""), o.get("metadata", {}).get("name", "")))


if __name__ == "__main__":
    try:
        docs = render(sys.argv[1])
        theirs = kubectl_render(sys.argv[1])
    except (OSError, Unsupported, yaml.YAMLError) as e:
        print("kustomize_lite.py: %s" % e, file=sys.stderr)
        sys.exit(1)
    if theirs is not None and by_name(theirs) != by_name(docs):
        print("kustomize_lite.py: %s renders otherwise than kubectl kustomize" % sys.argv[1],
              file=sys.stderr)
        sys.exit(1)
    sys.stdout.write(yaml.safe_dump_all(docs, sort_keys=True))
