#!/usr/bin/env python3
"""The bundle's SBOM (SPDX 2.3, JSON): every crate built into the Linux binaries, the C/C++
compiled into them (llama.cpp/ggml, SQLite, glibc, libstdc++, libgomp), every file of the
bundled QEMU with the Debian package it came from, the VM image's packages, and the model.

    python3 bundle/sbom.py BUNDLE_DIR > SBOM.spdx.json

Run from the repository root after the bundle's files are in place: it reads `cargo metadata`,
BUNDLE_DIR/qemu/SOURCES (bundle/qemu.sh), vm/manifest.json, models/manifest.json and the
vendored sources in BUNDLE_DIR/src/vendor; dpkg answers which package a host file is from.
"""

import hashlib
import json
import os
import re
import subprocess
import sys
from datetime import datetime, timezone

TARGET = "x86_64-unknown-linux-gnu"
ROOTS = ("abhed", "abhed-guest")


def run(*cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def spdx_id(*parts):
    return "SPDXRef-" + re.sub(r"[^A-Za-z0-9.-]", "-", "-".join(parts))


def package(kind, name, version, license, location, comment=None, checksum=None, purl=None):
    p = {
        "SPDXID": spdx_id(kind, name, version),
        "name": name,
        "versionInfo": version,
        "downloadLocation": location or "NOASSERTION",
        "licenseConcluded": "NOASSERTION",
        "licenseDeclared": license or "NOASSERTION",
        "copyrightText": "NOASSERTION",
        "primaryPackagePurpose": "LIBRARY",
    }
    if checksum:
        p["checksums"] = [{"algorithm": "SHA256", "checksumValue": checksum}]
    if purl:
        p["externalRefs"] = [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl", "referenceLocator": purl}]
    if comment:
        p["comment"] = comment
    return p


def crates():
    """Crates in the normal and build dependency graph of our binaries on Linux (not dev-deps,
    not other platforms' crates, which `cargo vendor` keeps as empty stubs)."""
    meta = json.loads(run("cargo", "metadata", "--format-version", "1", "--locked", "--filter-platform", TARGET))
    pkgs = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    checksums = {}
    with open("Cargo.lock") as f:
        lock = f.read()
    for m in re.finditer(r'name = "([^"]+)"\nversion = "([^"]+)"\nsource = "[^"]+"\nchecksum = "([0-9a-f]+)"', lock):
        checksums[(m[1], m[2])] = m[3]
    seen, todo = set(), [i for i, p in pkgs.items() if p["name"] in ROOTS]
    while todo:
        i = todo.pop()
        if i in seen:
            continue
        seen.add(i)
        for d in nodes[i]["deps"]:
            if any(k["kind"] in (None, "build") for k in d["dep_kinds"]):
                todo.append(d["pkg"])
    out = []
    for i in sorted(seen, key=lambda i: (pkgs[i]["name"], pkgs[i]["version"])):
        p = pkgs[i]
        ours = p["source"] is None
        loc = p.get("repository") or "NOASSERTION"
        features = nodes[i].get("features", [])
        comment = "this repository" if ours else "crates.io; vendored in src/vendor"
        if features:
            comment += "; features: " + ", ".join(features)
        out.append(
            (
                p["name"],
                package(
                    "crate",
                    p["name"],
                    p["version"],
                    p.get("license") or "NOASSERTION",
                    loc,
                    comment,
                    checksums.get((p["name"], p["version"])),
                    None if ours else f"pkg:cargo/{p['name']}@{p['version']}",
                ),
                features,
            )
        )
    return out


def debian(path):
    """(package, version, license) of the Debian package that owns a host file."""
    owner = run("dpkg", "-S", path).split(":")[0]
    version = run("dpkg-query", "-W", "-f", "${Version}", owner)
    return owner, version, debian_license(owner)


# Read by hand from /usr/share/doc/PKG/copyright, for packages whose file is not machine-readable
# (or whose `Files: *` license is prose). Checked against Debian 12's packages.
CURATED = {
    "qemu-system-x86": "GPL-2.0-only",
    "qemu-system-common": "GPL-2.0-only",
    "qemu-system-data": "GPL-2.0-only",
    "libc6": "LGPL-2.1-or-later",
    "libgcc-s1": "GPL-3.0-or-later WITH GCC-exception-3.1",
    "libgnutls30": "LGPL-2.1-or-later",
    "libjpeg62-turbo": "IJG AND BSD-3-Clause AND Zlib",
    "libnl-3-200": "LGPL-2.1-only",
    "libnl-route-3-200": "LGPL-2.1-only",
    "libnuma1": "LGPL-2.1-only",
    "libpixman-1-0": "MIT",
    "libselinux1": "LicenseRef-public-domain",
    "libtasn1-6": "LGPL-2.1-or-later",
}


def debian_license(pkg):
    """The `Files: *` stanza's License of a DEP-5 copyright file, else the curated one, else
    NOASSERTION."""
    base = pkg.split(":")[0]
    if base in CURATED:
        return CURATED[base]
    try:
        with open(f"/usr/share/doc/{base}/copyright", errors="replace") as f:
            text = f.read()
    except OSError:
        return "NOASSERTION"
    for stanza in text.split("\n\n"):
        if re.search(r"^Files:\s*\*\s*$", stanza, re.M):
            m = re.search(r"^License:\s*(\S.*)$", stanza, re.M)
            if m:
                return spdx_license(m[1])
    return "NOASSERTION"


def spdx_license(debian):
    """Debian's short names to SPDX identifiers, where they are known; others are kept as
    LicenseRef- names."""
    known = {
        "GPL-2": "GPL-2.0-only", "GPL-2+": "GPL-2.0-or-later", "GPL-3": "GPL-3.0-only", "GPL-3+": "GPL-3.0-or-later",
        "LGPL-2": "LGPL-2.0-only", "LGPL-2+": "LGPL-2.0-or-later", "LGPL-2.1": "LGPL-2.1-only",
        "LGPL-2.1+": "LGPL-2.1-or-later", "LGPL-3": "LGPL-3.0-only", "LGPL-3+": "LGPL-3.0-or-later",
        "BSD-2-clause": "BSD-2-Clause", "BSD-3-clause": "BSD-3-Clause", "Expat": "MIT", "MIT": "MIT",
        "Apache-2.0": "Apache-2.0", "Zlib": "Zlib", "zlib": "Zlib", "ISC": "ISC", "public-domain": "LicenseRef-public-domain",
    }
    # Names Debian already spells as SPDX does.
    known.update({k: k for k in ("BSD-2-Clause", "BSD-3-Clause", "CC0-1.0", "FSFULLR", "MIT-0", "Unlicense", "X11")})
    parts = re.split(r"\s+(or|and)\s+", debian.strip(), flags=re.I)
    out = []
    for part in parts:
        low = part.lower()
        if low in ("or", "and"):
            out.append(low.upper())
        else:
            out.append(known.get(part, "LicenseRef-" + re.sub(r"[^A-Za-z0-9.-]", "-", part)))
    return " ".join(out)


def c_components(features, vendor):
    """The C/C++ code the static binary carries, besides what the crates' own licenses cover."""
    out = []
    sys2 = next((d for d in os.listdir(vendor) if d.startswith("llama-cpp-sys-2-")), None)
    if sys2:
        src = os.path.join(vendor, sys2, "llama.cpp")
        with open(os.path.join(src, "ggml", "CMakeLists.txt")) as f:
            ggml = ".".join(re.findall(r"set\(GGML_VERSION_(?:MAJOR|MINOR|PATCH) (\d+)\)", f.read()))
        via = f"compiled from the copy in crate {sys2} (src/vendor/{sys2}/llama.cpp)"
        out.append(package("c", "llama.cpp", "as in " + sys2, "MIT", "https://github.com/ggml-org/llama.cpp", via))
        out.append(package("c", "ggml", ggml, "MIT", "https://github.com/ggml-org/ggml", via + "; CPU backend only"))
        if "common" in features.get("llama-cpp-sys-2", []):
            out.append(package("c", "nlohmann-json", "NOASSERTION", "MIT", "https://github.com/nlohmann/json", "header-only, used by llama.cpp's common/ (" + via + ")"))
    sqlite = next((d for d in os.listdir(vendor) if d.startswith("libsqlite3-sys-")), None)
    if sqlite:
        with open(os.path.join(vendor, sqlite, "sqlite3", "sqlite3.h"), errors="replace") as f:
            m = re.search(r'#define SQLITE_VERSION\s+"([^"]+)"', f.read())
        out.append(package("c", "sqlite", m[1] if m else "NOASSERTION", "LicenseRef-public-domain", "https://sqlite.org", f"the amalgamation bundled by crate {sqlite} (rusqlite's `bundled` feature)"))
    # Linked in statically by crt-static, static-stdcxx and static-openmp.
    for name, path in (("glibc", "/usr/lib/x86_64-linux-gnu/libc.a"), ("libstdc++", "libstdc++.a"), ("libgomp", "libgomp.a")):
        if not path.startswith("/"):
            path = run("g++", "-print-file-name=" + path).strip()
        deb, version, _ = debian(path)
        lic = {"glibc": "LGPL-2.1-or-later", "libstdc++": "GPL-3.0-or-later WITH GCC-exception-3.1", "libgomp": "GPL-3.0-or-later WITH GCC-exception-3.1"}[name]
        out.append(package("c", name, version, lic, "NOASSERTION", f"linked statically into bin/abhed from {path} (Debian package {deb})", purl=f"pkg:deb/debian/{deb}@{version}"))
    return out


def qemu_files(bundle):
    """One package per Debian package the bundled QEMU's files come from."""
    by_pkg = {}
    with open(os.path.join(bundle, "qemu", "SOURCES")) as f:
        for line in f:
            rel, host = line.rstrip("\n").split("\t")
            # dpkg knows the path as installed, before usrmerge's /lib -> /usr/lib.
            try:
                deb, version, lic = debian(host)
            except subprocess.CalledProcessError:
                deb, version, lic = debian(host.replace("/usr/lib/", "/lib/", 1))
            by_pkg.setdefault((deb, version, lic), []).append("qemu/" + rel)
    return [
        package("deb", deb, version, lic, "https://deb.debian.org", "files: " + ", ".join(sorted(files)) + f"; license text: licenses/debian/{deb.split(':')[0]}", purl=f"pkg:deb/debian/{deb.split(':')[0]}@{version}")
        for (deb, version, lic), files in sorted(by_pkg.items())
    ]


def vm_image():
    with open("vm/manifest.json") as f:
        m = json.load(f)
    lic = {"linux-image": "GPL-2.0-only", "busybox-static": "GPL-2.0-only", "bash-static": "GPL-3.0-or-later"}
    out = []
    for p in m["packages"]:
        key = next((k for k in lic if p["name"].startswith(k)), None)
        out.append(package("vm", p["name"], p["version"], lic.get(key, "NOASSERTION"), "https://deb.debian.org", "in share/abhed/vm (kernel, or initramfs)", p["sha256"], f"pkg:deb/debian/{p['name']}@{p['version']}"))
    return out


def model():
    with open("models/manifest.json") as f:
        m = json.load(f)
    return [package("model", m["name"], m["version"], m["license"], m["upstream"], f"share/abhed/models/{m['file']}; {m['source']}", m["sha256"])]


def main():
    bundle = sys.argv[1]
    crate_list = crates()
    features = {name: feats for name, _, feats in crate_list}
    pkgs = [p for _, p, _ in crate_list]
    pkgs += c_components(features, os.path.join(bundle, "src", "vendor"))
    pkgs += qemu_files(bundle)
    pkgs += vm_image()
    pkgs += model()
    # SPDX ids must be unique; a crate may appear once per version already.
    seen = set()
    for p in pkgs:
        while p["SPDXID"] in seen:
            p["SPDXID"] += "-x"
        seen.add(p["SPDXID"])
    abhed = next(p for p in pkgs if p["name"] == "abhed")
    abhed["primaryPackagePurpose"] = "APPLICATION"
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0")) or int(datetime.now(timezone.utc).timestamp())
    created = datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    doc = {
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": f"abhed {abhed['versionInfo']} air-gapped bundle",
        "documentNamespace": f"https://abhed.invalid/spdx/{os.path.basename(os.path.normpath(bundle))}-{epoch}",
        "creationInfo": {"created": created, "creators": ["Tool: abhed bundle/sbom.py"]},
        "packages": pkgs,
        "relationships": [{"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES", "relatedSpdxElement": abhed["SPDXID"]}]
        + [{"spdxElementId": abhed["SPDXID"], "relationshipType": "CONTAINS", "relatedSpdxElement": p["SPDXID"]} for p in pkgs if p is not abhed],
    }
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")
    missing = [p["name"] for p in pkgs if p["licenseDeclared"] == "NOASSERTION"]
    print(f"sbom.py: {len(pkgs)} components; without a declared license: {', '.join(missing) or 'none'}", file=sys.stderr)


if __name__ == "__main__":
    main()
