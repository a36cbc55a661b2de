#!/usr/bin/env python3
"""kustomize_lite_test.py — the renderer k8s_validate.sh uses where kubectl
is missing (CI has none): its strategic merge against what kubectl
kustomize does, on small kustomizations written here. The expected objects
are spelled out, so the tests run without kubectl; where kubectl is
installed each case is also rendered by it and must come out the same.

    python3 kustomize_lite_test.py     (exit 0: every case passed)
"""
import os
import shutil
import sys
import tempfile
import unittest

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kustomize_lite as kl  # noqa: E402

BASE = {
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    "metadata": {"name": "d", "namespace": "n", "labels": {"a": "1", "b": "2"}},
    "spec": {
        "selector": {"matchLabels": {"app": "d"}},
        "template": {
            "metadata": {"labels": {"app": "d"}},
            "spec": {
                "containers": [{
                    "name": "main",
                    "image": "img:1",
                    "command": ["/bin/a", "x"],
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                    "volumeMounts": [{"name": "v1", "mountPath": "/v1"}],
                }],
                "volumes": [{"name": "v1", "emptyDir": {}}],
            },
        },
    },
}


def patch(spec):
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "d", "namespace": "n"}, "spec": {"template": {"spec": spec}}}


class Render(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def write(self, rel, obj, many=False):
        p = os.path.join(self.dir, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            if many:
                yaml.safe_dump_all(obj, f)
            else:
                yaml.safe_dump(obj, f)

    def overlay(self, patch_obj):
        """base/ with BASE, over/ patching it; returns over/'s rendering."""
        self.write("base/ds.yaml", BASE)
        self.write("base/kustomization.yaml", {"resources": ["ds.yaml"]})
        self.write("over/p.yaml", patch_obj)
        self.write("over/kustomization.yaml",
                   {"resources": ["../base"], "patches": [{"path": "p.yaml"}]})
        got = kl.render(os.path.join(self.dir, "over"))
        theirs = kl.kubectl_render(os.path.join(self.dir, "over"))
        if theirs is not None:
            self.assertEqual(got, theirs, "kustomize_lite.py and kubectl kustomize differ")
        self.assertEqual(len(got), 1)
        return got[0]

    def main_container(self, obj):
        return obj["spec"]["template"]["spec"]["containers"][0]

    def test_lists_merge_by_key_patch_items_first(self):
        out = self.overlay(patch({"containers": [{
            "name": "main",
            "env": [{"name": "C", "value": "3"}, {"name": "A", "value": "9"}],
            "volumeMounts": [{"name": "v2", "mountPath": "/v2"}],
        }], "volumes": [{"name": "v2", "hostPath": {"path": "/h"}}]}))
        c = self.main_container(out)
        self.assertEqual(c["env"], [{"name": "C", "value": "3"}, {"name": "A", "value": "9"},
                                    {"name": "B", "value": "2"}])
        self.assertEqual([m["mountPath"] for m in c["volumeMounts"]], ["/v2", "/v1"])
        self.assertEqual([v["name"] for v in out["spec"]["template"]["spec"]["volumes"]],
                         ["v2", "v1"])
        self.assertEqual(c["image"], "img:1")

    def test_new_container_after_the_patched_one(self):
        out = self.overlay(patch({"containers": [
            {"name": "main", "image": "img:2"},
            {"name": "side", "image": "img:3"},
        ]}))
        cs = out["spec"]["template"]["spec"]["containers"]
        self.assertEqual([(c["name"], c["image"]) for c in cs],
                         [("main", "img:2"), ("side", "img:3")])
        self.assertEqual(cs[0]["command"], ["/bin/a", "x"])

    def test_plain_lists_are_replaced(self):
        c = self.main_container(self.overlay(patch({"containers": [
            {"name": "main", "command": ["/bin/b"]}]})))
        self.assertEqual(c["command"], ["/bin/b"])

    def test_null_deletes_a_key(self):
        p = patch({})
        p["metadata"]["labels"] = {"a": None, "c": "3"}
        out = self.overlay(p)
        self.assertEqual(out["metadata"]["labels"], {"b": "2", "c": "3"})

    def test_refusals(self):
        self.write("base/ds.yaml", BASE)
        self.write("base/kustomization.yaml", {"resources": ["ds.yaml"], "namePrefix": "x-"})
        with self.assertRaisesRegex(kl.Unsupported, "namePrefix"):
            kl.render(os.path.join(self.dir, "base"))
        self.write("base/kustomization.yaml", {"resources": ["ds.yaml"]})
        p = patch({})
        p["metadata"]["name"] = "other"
        self.write("over/p.yaml", p)
        self.write("over/kustomization.yaml",
                   {"resources": ["../base"], "patches": [{"path": "p.yaml"}]})
        with self.assertRaisesRegex(kl.Unsupported, "matches 0 objects"):
            kl.render(os.path.join(self.dir, "over"))
        self.write("over/kustomization.yaml", {"resources": ["../base"], "patches": [
            {"patch": "{}", "target": {"kind": "DaemonSet"}}]})
        with self.assertRaisesRegex(kl.Unsupported, "other than"):
            kl.render(os.path.join(self.dir, "over"))


if __name__ == "__main__":
    unittest.main()
