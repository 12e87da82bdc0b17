"""Prints the passes and values of every counters entry in a flashprof JSON report (stdin)."""
import json
import sys

report = json.load(sys.stdin)
for entry in report.get("counters", []):
    if "Ok" not in entry:
        print("unavailable", entry)
        continue
    outcome = entry["Ok"]
    values = ", ".join("{}={}".format(m["name"], m["value"]) for m in outcome["student"]["metrics"])
    print("passes={} {}".format(outcome["passes"], values))
