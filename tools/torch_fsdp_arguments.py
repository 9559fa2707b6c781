#!/usr/bin/env python3
"""The FSDP arguments each torch version accepts, read from torch's own files of that release (docs/recommend.md).

Usage:
  tools/torch_fsdp_arguments.py --debs DIR [--out data/torch_fsdp_arguments.csv]
  tools/torch_fsdp_arguments.py --tree DIR --version V --release R --origin O   (one version's files, a fixture)

--debs DIR holds Debian's python3-torch packages of the supported versions (VERSIONS), as
`apt-get download python3-torch=VERSION` fetches them; the script reads the .deb files themselves (an ar archive
around data.tar.*), standard library only. --tree DIR is a folder holding torch/distributed/... (a checkout, an
unpacked package or a test fixture).

For each version it reads, without importing torch (Python's ast on the files' text):
- the names `from torch.distributed.fsdp import NAME` gives (the module's imports and definitions), and those of
  torch.distributed._composable.fsdp where that module exists (FSDP2's home before torch.distributed.fsdp);
- the parameters of FullyShardedDataParallel.__init__ and of fully_shard (the definition, not the @overload stubs),
  each with its default as written;
- the members of the enum ShardingStrategy and the fields of the dataclasses CPUOffload and CPUOffloadPolicy (with
  the fields of their bases).
Each class or function is found by following the `from ... import` lines from torch/distributed/fsdp/__init__.py.

It writes one CSV row per name: version, release, origin, callable (a module, class or function), argument, default,
source (file:line in the release). The header's comment lines name this script and the SHA-256 of its text.
"""

import argparse
import ast
import hashlib
import io
import os
import sys
import tarfile

# The supported minor versions: the torch releases whose files Debian ships (python3-torch in bookworm, trixie and
# sid), each with its Debian package version. Other releases are not read (docs/recommend.md says why).
VERSIONS = [("1.13", "v1.13.1", "1.13.1+dfsg-4"), ("2.6", "v2.6.0", "2.6.0+dfsg-7"), ("2.14", "v2.14.1", "2.14.1+dfsg-1")]

FSDP_MODULE = "torch.distributed.fsdp"
COMPOSABLE_MODULE = "torch.distributed._composable.fsdp"
FUNCTIONS = [("FullyShardedDataParallel", "__init__"), ("fully_shard", None)]
ENUMS = ["ShardingStrategy"]
DATACLASSES = ["CPUOffload", "CPUOffloadPolicy"]
PACKAGE_ROOT = "usr/lib/python3/dist-packages/"


def script_hash():
    with open(os.path.abspath(__file__), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class Source:
    """torch's files of one release: from a folder or from a Debian package's data archive."""

    def __init__(self, tree=None, deb=None):
        self.files = {}
        self.tree = tree
        if deb is not None:
            self.files = deb_files(deb)
        self.cache = {}

    def read(self, path):
        """The parsed file `path` (torch/...), or None when the release has no such file."""
        if path not in self.cache:
            text = None
            if self.tree is not None:
                full = os.path.join(self.tree, path)
                if os.path.isfile(full):
                    with open(full, encoding="utf-8") as f:
                        text = f.read()
            else:
                text = self.files.get(path)
            self.cache[path] = ast.parse(text, filename=path) if text is not None else None
        return self.cache[path]


def deb_files(deb):
    """{torch/...py: text} of the torch/distributed/ files in a .deb (ar archive: debian-binary, control, data)."""
    with open(deb, "rb") as f:
        data = f.read()
    if not data.startswith(b"!<arch>\n"):
        raise SystemExit("%s: not a Debian package (no ar header)" % deb)
    pos, out = 8, {}
    while pos + 60 <= len(data):
        name = data[pos:pos + 16].decode().strip().rstrip("/")
        size = int(data[pos + 48:pos + 58].decode().strip())
        body = data[pos + 60:pos + 60 + size]
        pos += 60 + size + (size % 2)
        if not name.startswith("data.tar"):
            continue
        with tarfile.open(fileobj=io.BytesIO(body), mode="r:*") as tar:
            for m in tar:
                path = m.name[2:] if m.name.startswith("./") else m.name
                if m.isfile() and path.startswith(PACKAGE_ROOT + "torch/distributed/") and path.endswith(".py"):
                    out[path[len(PACKAGE_ROOT):]] = tar.extractfile(m).read().decode("utf-8")
    if not out:
        raise SystemExit("%s: no torch/distributed/ files under %s" % (deb, PACKAGE_ROOT))
    return out


def module_files(module):
    stem = module.replace(".", "/")
    return [stem + "/__init__.py", stem + ".py"]


def module_path(src, module):
    """The file of `module`, or None."""
    for f in module_files(module):
        if src.read(f) is not None:
            return f
    return None


def absolute(path, node):
    """The module a `from ... import` in file `path` names."""
    if not node.level:
        return node.module
    package = os.path.dirname(path).split("/")  # the package of an __init__.py or of a module alike
    package = package[:len(package) - (node.level - 1)]
    return ".".join(package + ([node.module] if node.module else []))


def exports(src, path):
    """[(name, line)] a module binds at its top level: imported names (as bound) and definitions."""
    out = []
    for node in src.read(path).body:
        if isinstance(node, ast.ImportFrom):
            out += [((a.asname or a.name), node.lineno) for a in node.names if a.name != "*"]
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out.append((node.name, node.lineno))
    seen, unique = set(), []
    for name, line in out:
        if name not in seen:
            seen.add(name)
            unique.append((name, line))
    return unique


def is_overload(node):
    return any((isinstance(d, ast.Name) and d.id == "overload") or (isinstance(d, ast.Attribute) and d.attr == "overload")
               for d in node.decorator_list)


def find(src, path, name, depth=0):
    """(file, node) of the class or function `name` bound in file `path`, following its `from ... import` lines."""
    tree = src.read(path)
    if tree is None or depth > 8:
        return None
    found = None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == name and not is_overload(node):
            found = (path, node)  # the last definition wins, as at import
    if found:
        return found
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            for a in node.names:
                if (a.asname or a.name) == name:
                    target = module_path(src, absolute(path, node))
                    if target:
                        hit = find(src, target, a.name, depth + 1)
                        if hit:
                            return hit
                    sub = module_path(src, absolute(path, node) + "." + a.name)
                    if sub:
                        return None  # a submodule, not a class or function
    return None


def parameters(func):
    """[(name, default text, line)] of a function's parameters, self and *args/**kwargs left out."""
    a = func.args
    positional = a.posonlyargs + a.args
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    out = [(p.arg, "" if d is None else ast.unparse(d), p.lineno) for p, d in zip(positional, defaults)]
    out += [(p.arg, "" if d is None else ast.unparse(d), p.lineno) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    return [r for r in out if r[0] != "self"]


def version_rows(src):
    """[(callable, argument, default, source)] of one release."""
    rows = []
    fsdp = module_path(src, FSDP_MODULE)
    if fsdp is None:
        raise SystemExit("no %s in the files given" % FSDP_MODULE)
    homes = [(FSDP_MODULE, fsdp)]
    composable = module_path(src, COMPOSABLE_MODULE)
    if composable:
        homes.append((COMPOSABLE_MODULE, composable))
    for module, path in homes:
        rows += [(module, name, "", "%s:%d" % (path, line)) for name, line in exports(src, path)]

    def locate(name):
        for _, path in homes:
            hit = find(src, path, name)
            if hit:
                return hit
        return None

    for name, method in FUNCTIONS:
        hit = locate(name)
        if not hit:
            continue
        path, node = hit
        if method:
            node = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == method), None)
            if node is None:
                continue
        rows += [(name, p, d, "%s:%d" % (path, line)) for p, d, line in parameters(node)]
    for name in ENUMS:
        hit = locate(name)
        if hit:
            path, node = hit
            for n in node.body:
                if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                    rows.append((name, n.targets[0].id, ast.unparse(n.value), "%s:%d" % (path, n.lineno)))
    for name in DATACLASSES:
        hit = locate(name)
        chain = []
        while hit and len(chain) < 4:
            chain.append(hit)
            bases = [b.id for b in hit[1].bases if isinstance(b, ast.Name)]
            hit = find(src, hit[0], bases[0]) if bases else None
        fields = {}
        for path, node in reversed(chain):  # a base's fields first, a subclass's override them
            for n in node.body:
                if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name):
                    fields[n.target.id] = ("" if n.value is None else ast.unparse(n.value), "%s:%d" % (path, n.lineno))
        rows += [(name, f, d, s) for f, (d, s) in fields.items()]
    return sorted(set(rows), key=lambda r: (r[0], r[1]))


def write_table(out, versions):
    """versions: [(version, release, origin, rows)]."""
    buf = io.StringIO()
    buf.write("# The FSDP arguments each torch version accepts, read from torch's files of its release.\n")
    buf.write("# Written by tools/torch_fsdp_arguments.py sha256 %s; do not edit by hand.\n" % script_hash())
    buf.write("version,release,origin,callable,argument,default,source\n")
    for version, release, origin, rows in versions:
        for row in rows:
            buf.write(",".join(_csv(x) for x in (version, release, origin) + tuple(row)) + "\n")
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
    p.add_argument("--debs", help="a folder with python3-torch_VERSION_*.deb of each supported version")
    p.add_argument("--tree", help="one version's files in a folder (holding torch/distributed/...)")
    p.add_argument("--version", help="with --tree: the minor version")
    p.add_argument("--release", help="with --tree: the release (v2.6.0)")
    p.add_argument("--origin", help="with --tree: where the files came from")
    p.add_argument("--out", default="-", help="the CSV to write (default: standard output)")
    a = p.parse_args()
    if a.tree:
        if not (a.version and a.release and a.origin):
            p.error("--tree needs --version, --release and --origin")
        write_table(a.out, [(a.version, a.release, a.origin, version_rows(Source(tree=a.tree)))])
        return
    if not a.debs:
        p.error("give --debs or --tree")
    versions = []
    for version, release, package in VERSIONS:
        deb = os.path.join(a.debs, "python3-torch_%s_amd64.deb" % package.replace(":", "%3a"))
        if not os.path.isfile(deb):
            p.error("no %s (apt-get download python3-torch=%s)" % (deb, package))
        with open(deb, "rb") as f:
            sha = hashlib.sha256(f.read()).hexdigest()
        origin = "Debian python3-torch %s amd64 sha256 %s" % (package, sha)
        versions.append((version, release, origin, version_rows(Source(deb=deb))))
    write_table(a.out, versions)


if __name__ == "__main__":
    main()
