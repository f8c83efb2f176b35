#!/usr/bin/env python3
"""bench/check_results.py [--own] SCHEMA RESULTS: validates a `uopjit bench`
results.json against bench/results.schema.json.

With the jsonschema package (Debian: python3-jsonschema) it validates with
it; without (or with --own), with the small validator below, which knows the keywords the
schema uses: type (a name or a list), enum, required, properties,
additionalProperties false, items, minItems, minimum, exclusiveMinimum.
Prints "valid (VALIDATOR)" and exits 0, or prints each problem with its
path and exits 1.
"""
import json
import sys

TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def type_ok(value, name):
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, TYPES[name])


def check(value, schema, path, problems):
    types = schema.get("type")
    if types is not None:
        names = types if isinstance(types, list) else [types]
        if not any(type_ok(value, n) for n in names):
            problems.append(f"{path}: {value!r} is not of type {types}")
            return
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            problems.append(f"{path}: {value} is less than the minimum {schema['minimum']}")
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            problems.append(f"{path}: {value} is not above {schema['exclusiveMinimum']}")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                problems.append(f"{path}: '{key}' is a required property")
        props = schema.get("properties", {})
        for key, item in value.items():
            if key in props:
                check(item, props[key], f"{path}.{key}", problems)
            elif schema.get("additionalProperties") is False:
                problems.append(f"{path}: additional property '{key}' is not allowed")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            problems.append(f"{path}: fewer than {schema['minItems']} items")
        if "items" in schema:
            for k, item in enumerate(value):
                check(item, schema["items"], f"{path}[{k}]", problems)


def main():
    args = sys.argv[1:]
    own = bool(args) and args[0] == "--own"
    if own:
        args = args[1:]
    if len(args) != 2:
        print("usage: check_results.py [--own] SCHEMA RESULTS")
        return 2
    with open(args[0]) as f:
        schema = json.load(f)
    with open(args[1]) as f:
        data = json.load(f)
    try:
        import jsonschema
    except ImportError:
        jsonschema = None
    if own:
        jsonschema = None
    if jsonschema is not None:
        validator = jsonschema.Draft202012Validator(schema)
        problems = [f"${''.join(f'[{p}]' if isinstance(p, int) else f'.{p}' for p in e.absolute_path)}: {e.message}"
                    for e in validator.iter_errors(data)]
        try:
            from importlib.metadata import version
            name = f"jsonschema {version('jsonschema')}"
        except Exception:
            name = "jsonschema"
    else:
        problems = []
        check(data, schema, "$", problems)
        name = "bench/check_results.py's own validator"
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"valid ({name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
