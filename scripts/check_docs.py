#!/usr/bin/env python3
"""Checks the documents' references: every docs/logs/... log a tracked text cites exists, every log kept under
docs/logs/ is cited by one (a current figure), and every repository path docs/ARCHITECTURE.md names exists (not a
build/... one, which a build makes).
A `...-fragment-...` after a full log name cites the log that shares its first 12 characters and holds the fragment.
usage: scripts/check_docs.py   (exit status 1 and the faults on stderr where one does not hold)"""
import os
import re
import subprocess
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
tracked = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout.split()
logs = {f for f in tracked if f.startswith("docs/logs/")}
texts = [f for f in tracked if not f.startswith(("docs/logs/", "docs/gpu/")) and
         f.endswith((".md", ".h", ".cpp", ".cu", ".py", ".sh", ".txt", ".cmake"))]
faults, cited = [], set()

for path in texts:
    text = open(os.path.join(root, path), errors="replace").read()
    last = None
    for m in re.finditer(r"docs/logs/([A-Za-z0-9_.{},-]+\.log)|`\.\.\.-([A-Za-z0-9_-]+)-\.\.\.`", text):
        if m.group(1):
            name = m.group(1)
            group = re.match(r"(.*)\{(.*)\}(.*)", name)
            names = [group[1] + alt + group[3] for alt in group[2].split(",")] if group else [name]
            for n in names:
                cited.add("docs/logs/" + n)
                if "docs/logs/" + n not in logs:
                    faults.append(f"{path}: docs/logs/{n} does not exist")
            last = names[-1]
        elif last:
            matches = [log for log in logs if m.group(2) in log and os.path.basename(log)[:12] == last[:12]]
            if not matches:
                faults.append(f"{path}: ...-{m.group(2)}-... matches no log beside {last}")
            cited.update(matches)

for log in sorted(logs - cited):
    faults.append(f"{log}: cited by no document or source")

architecture = open(os.path.join(root, "docs/ARCHITECTURE.md")).read()
for p in sorted(set(re.findall(r"(?<![\w/])((?:engine|ui|app|tests|cmake|scripts|docs|bench)/[A-Za-z0-9_./-]*[A-Za-z0-9_])",
                                architecture))):
    if "NAME" not in p and not os.path.exists(os.path.join(root, p)):
        faults.append(f"docs/ARCHITECTURE.md: {p} does not exist")

for fault in faults:
    print(fault, file=sys.stderr)
print(f"{len(logs)} logs, all cited; every path in docs/ARCHITECTURE.md exists" if not faults else
      f"{len(faults)} faults", file=sys.stderr if faults else sys.stdout)
sys.exit(1 if faults else 0)
