#!/usr/bin/env python3
"""The ds_config keys each DeepSpeed version accepts, read from DeepSpeed's source at its tags (docs/recommend.md).

Usage:
  tools/deepspeed_config_keys.py --git-dir DEEPSPEED.git [--out data/deepspeed_config_keys.csv]
  tools/deepspeed_config_keys.py --tree DIR --version V --tag T --commit C   (a checkout or a fixture, one version)

For each supported minor version (VERSIONS: its last patch tag) it reads, without importing DeepSpeed (Python's ast
on the files' text, standard library only):

- zero_optimization: the fields of the pydantic model DeepSpeedZeroConfig (deepspeed/runtime/zero/config.py), each
  field's name and its `alias=` (DeepSpeedConfigModel sets extra="forbid" and populate_by_name, so exactly these
  names are accepted, anything else is refused), with the models its fields name followed into their files
  (offload_optimizer, offload_param, ...);
- the top-level keys: the keys deepspeed/runtime/config.py, and the deepspeed modules it imports from, read from the
  top-level dict `param_dict` (`param_dict[K]`, `K in param_dict`, `param_dict.get(K)`, `get_*_param(param_dict,
  K, ...)`), with K's string constant resolved through the modules' imports; and, one level down, the keys read
  from such a block (`get_*_param(param_dict[K], K2, ...)`, or from a name assigned `param_dict[K]`). DeepSpeed
  does not refuse an unknown top-level key: this list says which keys that version reads.

It writes one CSV row per key: version, tag, commit, key (a dotted path), default (the literal default when it is
static, else the expression), note (alias of FIELD, deprecated), source (file:line at the tag). The header's comment
lines name this script and the SHA-256 of its text, so a table written by another script version is seen as such.
"""

import argparse
import ast
import hashlib
import io
import os
import subprocess
import sys

# The supported minor versions, each read at its last patch tag (git tag -l 'v0.1*' in DeepSpeed's repository).
VERSIONS = [("0.14", "v0.14.5"), ("0.15", "v0.15.4"), ("0.16", "v0.16.9"), ("0.17", "v0.17.6"), ("0.18", "v0.18.9"),
            ("0.19", "v0.19.5")]

ZERO_FILE = "deepspeed/runtime/zero/config.py"
ZERO_CLASS = "DeepSpeedZeroConfig"
TOP_FILE = "deepspeed/runtime/config.py"
TOP_CLASS = "DeepSpeedConfig"
TOP_DICT = "param_dict"
GETTERS = ("get_scalar_param", "get_list_param", "get_dict_param")


def script_hash():
    with open(os.path.abspath(__file__), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class Source:
    """DeepSpeed's files at one tag: from a git directory or a plain folder."""

    def __init__(self, git_dir=None, tag=None, tree=None):
        self.git_dir, self.tag, self.tree = git_dir, tag, tree
        self.cache = {}

    def read(self, path):
        if path not in self.cache:
            text = None
            if self.tree is not None:
                full = os.path.join(self.tree, path)
                if os.path.isfile(full):
                    with open(full, encoding="utf-8") as f:
                        text = f.read()
            else:
                r = subprocess.run(["git", "--git-dir", self.git_dir, "show", self.tag + ":" + path],
                                   capture_output=True, text=True, check=False)
                text = r.stdout if r.returncode == 0 else None
            self.cache[path] = ast.parse(text, filename=path) if text is not None else None
        return self.cache[path]


def module_file(current, module, level):
    """The file of `from module import ...` written in `current` (relative imports by `level`)."""
    if level:
        base = os.path.dirname(current)
        for _ in range(level - 1):
            base = os.path.dirname(base)
        parts = [base] + (module.split(".") if module else [])
        stem = "/".join(p for p in parts if p)
    else:
        stem = module.replace(".", "/")
    return stem


def candidates(stem):
    return [stem + ".py", stem + "/__init__.py"]


def imports(src, path):
    """[(file, names or None for *)] of the `from ... import` lines of a file, deepspeed modules only."""
    tree = src.read(path)
    out = []
    for node in tree.body if tree else []:
        if isinstance(node, ast.ImportFrom):
            stem = module_file(path, node.module, node.level)
            if not stem.startswith("deepspeed"):
                continue
            for f in candidates(stem):
                if src.read(f) is not None:
                    names = None if any(a.name == "*" for a in node.names) else [a.name for a in node.names]
                    out.append((f, names))
                    break
    return out


def string_constants(src, path, active=None):
    """NAME -> value of the module-level literal constants of a file and what it imports."""
    memo = src.cache.setdefault(("constants", ), {})
    if path in memo:
        return memo[path]
    active = set() if active is None else active
    if path in active:  # an import cycle: what is known so far
        return {}
    active.add(path)
    tree = src.read(path)
    out = {}
    for f, names in imports(src, path):
        sub = string_constants(src, f, active)
        out.update(sub if names is None else {n: v for n, v in sub.items() if n in names})
    for node in tree.body if tree else []:
        if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Constant, ast.UnaryOp)):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                continue
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = value
    active.discard(path)
    memo[path] = out
    return out


def find_class(src, path, name, seen=None):
    """(file, ClassDef) of class `name` as seen from `path`: defined there or imported into it."""
    seen = set() if seen is None else seen
    if path in seen:
        return None
    seen.add(path)
    tree = src.read(path)
    if tree is None:
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return path, node
    for f, names in imports(src, path):
        if names is None or name in names:
            found = find_class(src, f, name, seen)
            if found:
                return found
    return None


def literal(expr):
    """The default as text: a literal's value (pp_int(x) as the integer), else the expression."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "pp_int" and expr.args:
        if len(expr.args) > 1:  # pp_int(value, "name"): DeepSpeed prints the name
            return ast.unparse(expr.args[0])
        expr = expr.args[0]
        try:
            return str(int(ast.literal_eval(expr)))
        except (ValueError, TypeError, SyntaxError):
            return ast.unparse(expr)
    try:
        v = ast.literal_eval(expr)
    except (ValueError, TypeError, SyntaxError):
        return ast.unparse(expr)
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    return str(v)


def annotation_names(expr):
    return {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)}


def model_fields(src, path, cls, prefix, rows, depth=0):
    """Rows of the fields of pydantic model `cls` (a ClassDef in `path`), following the models its fields name."""
    for node in cls.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        name = node.target.id
        default, alias, note = "", None, ""
        value = node.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "Field":
            kw = {k.arg: k.value for k in value.keywords if k.arg}
            if value.args:
                default = literal(value.args[0])
            elif "default" in kw:
                default = literal(kw["default"])
            elif "default_factory" in kw:
                default = ast.unparse(kw["default_factory"]) + "()"
            if "alias" in kw:
                alias = ast.literal_eval(kw["alias"])
            extra = kw.get("json_schema_extra")
            flags = {k.arg: k.value for k in value.keywords}
            dep = False
            if isinstance(extra, ast.Dict):
                for k, v in zip(extra.keys, extra.values):
                    if isinstance(k, ast.Constant) and k.value == "deprecated" and isinstance(v, ast.Constant):
                        dep = bool(v.value)
            elif "deprecated" in flags and isinstance(flags["deprecated"], ast.Constant):
                dep = bool(flags["deprecated"].value)
            note = "deprecated" if dep else ""
        elif value is not None:
            default = literal(value)
        line = "%s:%d" % (path, node.lineno)
        rows.append((prefix + name, default, note, line))
        if alias:
            rows.append((prefix + alias, default, ("alias of " + name + (" " + note if note else "")).strip(), line))
        if depth < 3:
            for n in sorted(annotation_names(node.annotation)):
                if n[:1].isupper() and n not in ("Optional", "Dict", "Any", "List", "Union", "Path", "Literal"):
                    found = find_class(src, path, n)
                    if found and any(isinstance(b, ast.AnnAssign) for b in found[1].body):
                        for key in (name, alias) if alias else (name, ):
                            model_fields(src, found[0], found[1], prefix + key + ".", rows, depth + 1)


def called_with_dict(src, path):
    """{file: names} of the functions and classes `path` imports and calls with the top-level dict as an argument."""
    tree = src.read(path)
    origin = {}
    for f, names in imports(src, path):
        for n in names or []:
            origin[n] = f
    out = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in origin and \
                any(_is_dict(a) for a in n.args):
            out.setdefault(origin[n.func.id], set()).add(n.func.id)
    return out


def local_scopes(src, path):
    """DeepSpeedConfig and the functions of `path` it calls with the top-level dict, transitively (a function that
    names a block `param_dict` too, such as get_sparse_attention_mode, is left out: it is called with the block)."""
    tree = src.read(path)
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    todo, out = [TOP_CLASS], set()
    while todo:
        name = todo.pop()
        if name in out or name not in defs:
            continue
        out.add(name)
        for n in ast.walk(defs[name]):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and any(_is_dict(a) for a in n.args):
                todo.append(n.func.id)
    return out


def dict_keys(src, path, constants, rows, seen, only=None):
    """Rows of the keys read from the top-level dict `param_dict` in `path` (and one level below); with `only`, in
    those functions and classes of the file only."""
    tree = src.read(path)
    if tree is None:
        return
    consts = dict(constants)
    consts.update(string_constants(src, path))

    def keys_of(expr, func):
        """The keys an expression names: a string, a constant, a parameter's default, a loop over constants."""
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return [expr.value]
        if isinstance(expr, ast.Name):
            if isinstance(consts.get(expr.id), str):
                return [consts[expr.id]]
            if func is None:
                return []
            args = func.args
            pos = args.args[len(args.args) - len(args.defaults):]
            for a, d in list(zip(pos, args.defaults)) + list(zip(args.kwonlyargs, args.kw_defaults)):
                if a.arg == expr.id and d is not None:
                    return keys_of(d, None)
            for n in ast.walk(func):
                if isinstance(n, ast.For) and isinstance(n.target, ast.Name) and n.target.id == expr.id and \
                        isinstance(n.iter, (ast.List, ast.Tuple)):
                    return [k for e in n.iter.elts for k in keys_of(e, None)]
        return []

    def default_of(expr):
        if isinstance(expr, ast.Name) and expr.id in consts:
            v = consts[expr.id]
            return "true" if v is True else "false" if v is False else "null" if v is None else str(v)
        return literal(expr) if isinstance(expr, (ast.Constant, ast.UnaryOp)) else ""

    def add(keys, node, default=""):
        for key in keys:
            if key not in seen:
                seen.add(key)
                rows.append((key, default, "", "%s:%d" % (path, node.lineno)))

    scopes = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and (only is None or n.name in only)]
    for scope in scopes:
        blocks = {}  # a name assigned param_dict[K] (or .get(K)) in this function or class -> [K, ...]
        funcs = [n for n in ast.walk(scope) if isinstance(n, ast.FunctionDef)]
        for func in funcs:
            for n in ast.walk(func):
                got = None
                if isinstance(n, ast.Assign) and isinstance(n.value, ast.Subscript) and _is_dict(n.value.value):
                    got = n.value.slice
                elif isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and \
                        isinstance(n.value.func, ast.Attribute) and n.value.func.attr == "get" and \
                        _is_dict(n.value.func.value) and n.value.args:
                    got = n.value.args[0]
                if got is not None:
                    k = keys_of(got, func)
                    for t in n.targets:
                        if isinstance(t, (ast.Name, ast.Attribute)):
                            blocks.setdefault(ast.unparse(t), []).extend(x for x in k if x not in blocks.get(
                                ast.unparse(t), []))
        for func in funcs:
            for n in ast.walk(func):
                if isinstance(n, ast.Subscript) and _is_dict(n.value):
                    add(keys_of(n.slice, func), n)
                elif isinstance(n, ast.Compare) and len(n.ops) == 1 and isinstance(n.ops[0], (ast.In, ast.NotIn)):
                    c = n.comparators[0]
                    if _is_dict(c) or (isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and
                                       c.func.attr == "keys" and _is_dict(c.func.value)):
                        add(keys_of(n.left, func), n)
                elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get" and \
                        _is_dict(n.func.value) and n.args:
                    add(keys_of(n.args[0], func), n)
                elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in GETTERS and \
                        len(n.args) >= 2:
                    target, k = n.args[0], keys_of(n.args[1], func)
                    default = default_of(n.args[2]) if len(n.args) > 2 else ""
                    if _is_dict(target):
                        add(k, n, default)
                    elif isinstance(target, ast.Subscript) and _is_dict(target.value):
                        add([p + "." + c for p in keys_of(target.slice, func) for c in k], n, default)
                    elif isinstance(target, (ast.Name, ast.Attribute)) and ast.unparse(target) in blocks:
                        add([b + "." + c for b in blocks[ast.unparse(target)] for c in k], n, default)
                elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name):  # Model(**block): a pydantic model
                    for kw in n.keywords:
                        if kw.arg is None and isinstance(kw.value, ast.Name) and kw.value.id in blocks:
                            found = find_class(src, path, n.func.id)
                            for block in blocks[kw.value.id] if found else []:
                                sub = []
                                model_fields(src, found[0], found[1], block + ".", sub)
                                for key, default, note, source in sub:
                                    if key not in seen:
                                        seen.add(key)
                                        rows.append((key, default, note, source))


def _is_dict(expr):
    return isinstance(expr, ast.Name) and expr.id == TOP_DICT


def version_rows(src):
    """[(key, default, note, source)] of one version: zero_optimization's model, then the top-level keys."""
    rows = []
    found = find_class(src, ZERO_FILE, ZERO_CLASS)
    if not found:
        raise SystemExit("no class %s in %s" % (ZERO_CLASS, ZERO_FILE))
    model_fields(src, found[0], found[1], "zero_optimization.", rows)
    top, seen = [], set(r[0] for r in rows)
    constants = string_constants(src, TOP_FILE)
    dict_keys(src, TOP_FILE, constants, top, seen, local_scopes(src, TOP_FILE))
    for f, names in sorted(called_with_dict(src, TOP_FILE).items()):
        dict_keys(src, f, constants, top, seen, names)
    if "zero_optimization" not in seen and not any(r[0] == "zero_optimization" for r in top):
        top.append(("zero_optimization", "", "", "%s:%d" % (ZERO_FILE, found[1].lineno)))
    return sorted(rows + top, key=lambda r: r[0])


def write_table(out, versions):
    """versions: [(version, tag, commit, rows)]."""
    buf = io.StringIO()
    buf.write("# The ds_config keys each DeepSpeed version accepts, read from DeepSpeed's source at its tag.\n")
    buf.write("# Written by tools/deepspeed_config_keys.py sha256 %s; do not edit by hand.\n" % script_hash())
    buf.write("version,tag,commit,key,default,note,source\n")
    for version, tag, commit, rows in versions:
        for key, default, note, source in rows:
            buf.write(",".join(_csv(x) for x in (version, tag, commit, key, default, note, source)) + "\n")
    text = buf.getvalue()
    if out == "-":
        sys.stdout.write(text)
    else:
        with open(out, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)


def _csv(x):
    x = str(x)
    if any(c in x for c in ',"\n'):
        return '"' + x.replace('"', '""') + '"'
    return x


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--git-dir", help="a clone of github.com/deepspeedai/DeepSpeed with its tags")
    p.add_argument("--tree", help="one version's files in a folder (a checkout or a test fixture)")
    p.add_argument("--version", help="with --tree: the minor version")
    p.add_argument("--tag", help="with --tree: the tag")
    p.add_argument("--commit", help="with --tree: the commit")
    p.add_argument("--out", default="-", help="the CSV to write (default: standard output)")
    a = p.parse_args()
    if a.tree:
        if not (a.version and a.tag and a.commit):
            p.error("--tree needs --version, --tag and --commit")
        write_table(a.out, [(a.version, a.tag, a.commit, version_rows(Source(tree=a.tree)))])
        return
    if not a.git_dir:
        p.error("give --git-dir or --tree")
    versions = []
    for version, tag in VERSIONS:
        commit = subprocess.run(["git", "--git-dir", a.git_dir, "rev-parse", tag + "^{commit}"], capture_output=True,
                                text=True, check=True).stdout.strip()
        versions.append((version, tag, commit, version_rows(Source(git_dir=a.git_dir, tag=tag))))
    write_table(a.out, versions)


if __name__ == "__main__":
    main()
