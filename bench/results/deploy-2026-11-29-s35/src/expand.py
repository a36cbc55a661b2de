import re, subprocess, sys
out = subprocess.run(["systemd-analyze", "syscall-filter"], capture_output=True, text=True).stdout
groups, cur = {}, None
for line in out.splitlines():
    if line.startswith("@"):
        cur = line.strip(); groups[cur] = []
    elif cur and line.strip() and not line.strip().startswith("#"):
        groups[cur].append(line.strip())
def expand(name, seen=None):
    if not name.startswith("@"):
        return {name}
    s = set()
    for m in groups[name]:
        s |= expand(m)
    return s
nr = {}
for l in open("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"):
    m = re.match(r"#define __NR_(\w+)\s+(\d+)", l)
    if m: nr[m.group(1)] = int(m.group(2))
allow = expand("@system-service") - expand("@privileged")
nums = sorted(nr[n] for n in allow if n in nr)
print("/* @system-service less @privileged, systemd %s, x86_64 */" % subprocess.run(["systemd-analyze","--version"],capture_output=True,text=True).stdout.split()[1])
print("static const int unit_allow[] = {%s};" % ",".join(map(str, nums)))
allall = expand("@system-service")
print("static const int unit_allow_all[] = {%s};" % ",".join(map(str, sorted(nr[n] for n in allall if n in nr))))
print("/* in the set but unknown to this kernel header: %s */" % " ".join(sorted(n for n in allow if n not in nr)))
print("/* mbind in allow: %s; process_vm_readv: %s; clone3: %s; pidfd_getfd: %s */" % tuple(n in allow for n in ("mbind","process_vm_readv","clone3","pidfd_getfd")))
