#!/bin/sh
# metrics_prometheus.sh — the metrics endpoint against the real tools, for
# ctest. Starts this build's zppd (host backend, metrics_listen =
# 127.0.0.1:0: the bound port is read from its log line), runs a small
# ZeRO++ step through it (zpp-demo, 2 ranks), then:
#  - `promtool check metrics` on GET /metrics and on `zppctl metrics`;
#  - GET /healthz answers ok;
#  - a real Prometheus server (Debian's package) scrapes the live daemon on
#    loopback every second; its HTTP API must return zppd_calls_total with
#    outcome "ok" and up == 1 within a bounded wait.
# Everything lives in a temporary directory and is stopped on exit.
#
# Exit status: 0 pass, 1 fail, 77 (ctest: skipped) when promtool,
# prometheus, curl or python3 is missing — except under CI=true, where that
# fails (`make deps` installs them).
# Then every PromQL expression of the Grafana dashboard
# (deploy/grafana/zppd-dashboard.json, with its variables filled in as
# Grafana would: label_values() through the server's API) must be accepted
# by that server's query API. The scrape job also holds a target that is
# not zppd (the Prometheus server itself, as a Kubernetes pods job holds
# every annotated pod): the "Daemons up" panel must count 1. And the alert
# rules of docs/metrics.md pass `promtool check rules` and name only
# series zppd exposes.
# Usage: metrics_prometheus.sh ZPPD_BIN ZPP_DEMO_BIN ZPPCTL_BIN [DASHBOARD_JSON]
set -u
zppd=${1:?usage: metrics_prometheus.sh ZPPD_BIN ZPP_DEMO_BIN ZPPCTL_BIN [DASHBOARD_JSON]}
demo=${2:?usage}
zppctl=${3:?usage}
dashboard=${4:-}
WAIT_S=30

missing=""
for t in promtool prometheus curl python3; do
    command -v "$t" >/dev/null 2>&1 || missing="$missing $t"
done
if [ -n "$missing" ]; then
    if [ "${CI:-}" = "true" ]; then
        echo "metrics_prometheus.sh: missing:$missing (CI=true: make deps must install them)" >&2
        exit 1
    fi
    echo "metrics_prometheus.sh: skipped, missing:$missing (apt-get install prometheus curl)"
    exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/zppd-prom.XXXXXX") || exit 1
dpid=""
ppid_=""
cleanup() {
    for p in $ppid_ $dpid; do
        kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
    echo "metrics_prometheus.sh: FAIL: $*" >&2
    echo "---- zppd log ----" >&2
    cat "$tmp/zppd.log" >&2
    [ -f "$tmp/prometheus.log" ] && { echo "---- prometheus log ----" >&2; tail -n 30 "$tmp/prometheus.log" >&2; }
    exit 1
}

cat >"$tmp/zppd.conf" <<CONF
socket = $tmp/zppd.sock
socket_mode = 0600
backend = host
metrics_listen = 127.0.0.1:0
peer_listen =
CONF
"$zppd" -c "$tmp/zppd.conf" >"$tmp/zppd.log" 2>&1 &
dpid=$!
port=""
i=0
while [ $i -lt 100 ]; do
    port=$(sed -n 's/.*msg="metrics endpoint listening".* port=\([0-9]*\).*/\1/p' "$tmp/zppd.log")
    [ -n "$port" ] && [ -S "$tmp/zppd.sock" ] && break
    kill -0 "$dpid" 2>/dev/null || fail "zppd exited during start-up"
    sleep 0.1
    i=$((i + 1))
done
[ -n "$port" ] || fail "no 'metrics endpoint listening ... port=N' line within 10 s"
echo "zppd metrics on 127.0.0.1:$port"

"$demo" -s "$tmp/zppd.sock" --ranks 2 --nodes 2 --layers 1 --hidden 64 --timeout 60 \
    >"$tmp/demo.log" 2>&1 || { cat "$tmp/demo.log"; fail "zpp-demo failed"; }

url=http://127.0.0.1:$port
curl -sf --max-time 5 "$url/metrics" >"$tmp/metrics.txt" || fail "GET /metrics failed"
grep -q '^zppd_calls_total{.*outcome="ok"}' "$tmp/metrics.txt" || fail "no zppd_calls_total after a job"
promtool check metrics <"$tmp/metrics.txt" || fail "promtool check metrics (GET /metrics)"
"$zppctl" -s "$tmp/zppd.sock" metrics >"$tmp/ctl.txt" || fail "zppctl metrics"
promtool check metrics <"$tmp/ctl.txt" || fail "promtool check metrics (zppctl metrics)"
[ "$(curl -sf --max-time 5 "$url/healthz")" = "ok" ] || fail "GET /healthz is not ok"
echo "promtool: both expositions pass ($(wc -l <"$tmp/metrics.txt") lines)"

pport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$tmp/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: zppd
    static_configs:
      - targets: ['127.0.0.1:$port', '127.0.0.1:$pport']
YML
promtool check config "$tmp/prometheus.yml" >/dev/null || fail "promtool check config"
prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/data" \
    --web.listen-address="127.0.0.1:$pport" --log.level=warn >"$tmp/prometheus.log" 2>&1 &
ppid_=$!
api=http://127.0.0.1:$pport/api/v1/query
ok=""
i=0
while [ $i -lt $((WAIT_S * 2)) ]; do
    kill -0 "$ppid_" 2>/dev/null || fail "prometheus exited"
    calls=$(curl -sf --max-time 2 "$api" --data-urlencode 'query=zppd_calls_total{outcome="ok"}' 2>/dev/null)
    up=$(curl -sf --max-time 2 "$api" --data-urlencode 'query=up{job="zppd"}' 2>/dev/null)
    if printf '%s' "$calls" | grep -q '"__name__":"zppd_calls_total"' &&
        printf '%s' "$up" | grep -q "127.0.0.1:$port\"[^]]*\"value\":\[[0-9.]*,\"1\"\]" &&
        printf '%s' "$up" | grep -q "127.0.0.1:$pport\"[^]]*\"value\":\[[0-9.]*,\"1\"\]"; then
        ok=1
        break
    fi
    sleep 0.5
    i=$((i + 1))
done
[ -n "$ok" ] || fail "prometheus did not return zppd_calls_total within ${WAIT_S}s: $calls / $up"
echo "prometheus: $calls"
if [ -n "$dashboard" ]; then
    python3 - "$dashboard" "$api" <<'PY' || fail "a dashboard query was refused"
import json, re, sys, urllib.parse, urllib.request
dash, api = sys.argv[1], sys.argv[2]
d = json.load(open(dash))

def get(url):
    try:
        return json.load(urllib.request.urlopen(url, timeout=5))
    except Exception as e:  # 400 for a query that does not parse
        return {"status": "error", "error": str(e)}

# The variables, as Grafana fills them in: label_values(METRIC, LABEL) asks
# the server; "All" is the allValue, else every value as a regex.
subst = {"$__rate_interval": "1m"}
for v in d["templating"]["list"]:
    if v["type"] == "custom":
        vals = [x.strip() for x in v["query"].split(",")]
    elif v["type"] == "query":
        q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
        m = re.match(r"label_values\((\w+)(?:\{[^}]*\})?,\s*(\w+)\)$", q)
        r = get(api.rsplit("/", 1)[0] + "/label/%s/values?" % m.group(2) +
                urllib.parse.urlencode({"match[]": m.group(1)}))
        vals = r.get("data", [])
    else:
        continue
    cur = (v.get("current") or {}).get("value")
    if v.get("includeAll") and cur in ("$__all", ["$__all"]):
        # Grafana's escaping: a regex escape, written as a PromQL string.
        esc = [re.sub(r"([\\$^*{}\[\]'+?.()|])", r"\\\\\1", x) for x in vals]
        val = v.get("allValue") or "(" + "|".join(esc) + ")"
    elif cur and cur not in vals and v["type"] == "query":
        val = vals[0] if vals else ""
    else:
        val = (cur[0] if isinstance(cur, list) else cur) or (vals[0] if vals else "")
    subst["$" + v["name"]] = val
print("dashboard variables: %s" % subst)
bad = 0
n = 0
for p in d["panels"]:
    for t in p.get("targets", []):
        q = t["expr"]
        for k, v in sorted(subst.items(), key=lambda kv: -len(kv[0])):
            q = q.replace(k, v)
        n += 1
        r = get(api + "?" + urllib.parse.urlencode({"query": q}))
        if r.get("status") != "success":
            bad += 1
            print("dashboard panel %r: %s: %s" % (p["title"], q, r.get("error")))
        elif re.match(r"sum\(up\{", t["expr"]):
            res = r["data"]["result"]
            got = res[0]["value"][1] if res else "no data"
            if got != "1":
                bad += 1
                print("dashboard panel %r: %s counts %s, not the 1 zppd" % (p["title"], q, got))
print("dashboard: %d queries, %d refused or wrong" % (n, bad))
sys.exit(1 if bad else 0)
PY
fi
# The alert rules docs/metrics.md suggests (next to the dashboard's
# deploy/): promtool must accept them as a rule group, and every zppd_*
# series they name must be one the daemon exposes (PromQL takes an unknown
# name and the alert would never fire).
docs_md=${dashboard:+$(dirname "$(dirname "$(dirname "$dashboard")")")/docs/metrics.md}
if [ -n "$docs_md" ] && [ -f "$docs_md" ]; then
    python3 - "$docs_md" "$tmp/metrics.txt" "$tmp/rules.yml" <<'PY' || fail "docs/metrics.md's alerts"
import re, sys
md, expo, out = sys.argv[1:]
text = open(md).read()
block = re.search(r"Alerts worth having:\s*```yaml\n(.*?)```", text, re.S)
if not block:
    sys.exit("no ```yaml block of alerts after 'Alerts worth having:'")
rules = block.group(1)
exposed = set(re.findall(r"^# TYPE (\w+)", open(expo).read(), re.M))
bad = 0
for expr in re.findall(r"expr: (.*)", rules):
    for name in re.findall(r"\b(zppd_\w+)", expr):
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        if name not in exposed and base not in exposed:
            print("alert expression names %s, which zppd does not expose: %s" % (name, expr))
            bad += 1
with open(out, "w") as f:
    f.write("groups:\n  - name: zppd\n    rules:\n")
    f.write("".join("      " + l + "\n" for l in rules.splitlines()))
print("docs alerts: %d expressions, %d naming unknown series" % (len(re.findall("expr:", rules)), bad))
sys.exit(1 if bad else 0)
PY
    promtool check rules "$tmp/rules.yml" || fail "promtool check rules (docs/metrics.md's alerts)"
fi
kill -TERM "$ppid_" 2>/dev/null && wait "$ppid_" 2>/dev/null
ppid_=""
# The daemon must still stop cleanly (in sanitizer builds: no report).
kill -TERM "$dpid"
wait "$dpid"
rc=$?
dpid=""
[ $rc -eq 0 ] || fail "zppd exited $rc on SIGTERM"
echo "metrics_prometheus.sh: ok"
