"""Reads a Prometheus text exposition with Prometheus's own Python client (the parser vLLM's
dashboards' scrapers agree with) and prints what it understood as JSON:
{"types": {family: type}, "samples": [[name, {labels}, value], ...]}. A malformed exposition
makes the parser raise, and this script exit non-zero.
Usage: prometheus_read.py EXPOSITION_FILE"""
import json
import sys

from prometheus_client.parser import text_string_to_metric_families

with open(sys.argv[1], encoding="utf-8") as f:
    text = f.read()
types, samples = {}, []
for family in text_string_to_metric_families(text):
    types[family.name] = family.type
    for s in family.samples:
        samples.append([s.name, s.labels, s.value])
json.dump({"types": types, "samples": samples}, sys.stdout)
