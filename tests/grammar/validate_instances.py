#!/usr/bin/env python3
"""The oracle of tests/grammar: every generated document must parse as strict JSON and validate
against its schema (Draft 2020-12, with the format checker) in Python's jsonschema
(python3-jsonschema). Input: JSON lines {"name", "schema", "text"}. Prints one line per failure
and a summary; exits 1 on any failure."""
import datetime
import json
import re
import sys

from jsonschema import Draft202012Validator, FormatChecker

# Debian's jsonschema checks date-time and time only with the rfc3339-validator package, which
# Debian does not ship: without it those formats would pass unchecked. Then RFC 3339 section 5.6
# is checked here (full-time = partial-time time-offset; leap second 60 allowed as RFC 3339 does).
_TIME = r"([01][0-9]|2[0-3]):([0-5][0-9]):([0-5][0-9]|60)(\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
CHECKER = Draft202012Validator.FORMAT_CHECKER
if "date-time" not in CHECKER.checkers or "time" not in CHECKER.checkers:
    CHECKER = FormatChecker()

    @CHECKER.checks("time")
    def _time(s):
        return not isinstance(s, str) or re.fullmatch(_TIME, s) is not None

    @CHECKER.checks("date-time")
    def _date_time(s):
        if not isinstance(s, str):
            return True
        m = re.fullmatch(r"([0-9]{4}-[0-9]{2}-[0-9]{2})[Tt]" + _TIME, s)
        if not m:
            return False
        try:
            datetime.date.fromisoformat(m.group(1))
        except ValueError:
            return False
        return True


def reject_constant(c):
    raise ValueError("non-standard constant " + c)


def main(path):
    failures = 0
    n = 0
    checked_schemas = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            n += 1
            name = rec["name"]
            schema = rec["schema"]
            if name not in checked_schemas:
                Draft202012Validator.check_schema(schema)
                checked_schemas.add(name)
            try:
                doc = json.loads(rec["text"], parse_constant=reject_constant)
            except ValueError as e:
                print(f"FAIL {name}: not JSON ({e}): {rec['text']!r}")
                failures += 1
                continue
            v = Draft202012Validator(schema, format_checker=CHECKER)
            errors = list(v.iter_errors(doc))
            if errors:
                print(f"FAIL {name}: {errors[0].message} in {rec['text']!r}")
                failures += 1
    print(f"formats checked: {sorted(CHECKER.checkers)}")
    print(f"validated {n} documents of {len(checked_schemas)} schemas, {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
