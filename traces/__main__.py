"""``python -m traces PATH [--kind KIND] [--options JSON]``: read a trace, map it to PP LLM jobs
(:mod:`traces.mapping`) and print what the mapping did (:func:`traces.mapping.describe`)."""

from __future__ import annotations

import argparse
import json

from traces.mapping import describe, trace_scenario


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("path")
    parser.add_argument("--kind", default=None, help="reader (traces.READERS); default: from the file name")
    parser.add_argument("--options", type=json.loads, default={},
                        help='MappingOptions fields as JSON, e.g. \'{"start": 4838400, "length": 604800}\' '
                             'or \'{"start_rule": "memory", "memory_model": {"schedule": "1f1b"}}\'')
    args = parser.parse_args(argv)
    print(json.dumps(describe(trace_scenario(args.path, args.kind, **args.options)), indent=1))


if __name__ == "__main__":
    main()
