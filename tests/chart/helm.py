#!/usr/bin/env python3
"""Render or lint the chart with helm-python-sdk (Helm v4's SDK; no helm binary).

  helm.py lint CHART [VALUES_JSON]         -> lint report (JSON) on stdout, strict mode
  helm.py render CHART OUTDIR [VALUES_JSON] -> one file per rendered template in OUTDIR
  helm.py validate CHART VALUES_JSON       -> exit 1 with the schema error if values are invalid
  helm.py notes CHART VALUES_JSON          -> the rendered NOTES.txt on stdout
"""
import json
import os
import sys

import helm_python as helm

RELEASE, NAMESPACE = "mse", "monitoring"


def main(argv):
    command, chart = argv[1], argv[2]
    if command == "lint":
        values = json.loads(argv[3]) if len(argv) > 3 else None
        print(json.dumps(helm.lint(chart, values, strict=True, namespace=NAMESPACE)))
    elif command == "render":
        outdir = argv[3]
        values = json.loads(argv[4]) if len(argv) > 4 else {}
        os.makedirs(outdir, exist_ok=True)
        rendered = helm.Chart.load(chart).render(values, name=RELEASE, namespace=NAMESPACE, is_install=True)
        for path, text in sorted(rendered.items()):
            if path.endswith(".txt") or not text.strip():
                continue
            with open(os.path.join(outdir, os.path.basename(path)), "w") as f:
                f.write(text)
    elif command == "notes":
        rendered = helm.Chart.load(chart).render(json.loads(argv[3]), name=RELEASE, namespace=NAMESPACE, is_install=True)
        print("".join(text for path, text in rendered.items() if path.endswith("NOTES.txt")))
    elif command == "validate":
        try:
            helm.Chart.load(chart).validate_schema(json.loads(argv[3]))
        except helm.HelmError as e:
            print(e)
            return 1
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
