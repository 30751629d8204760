#!/usr/bin/env python3
"""CTest `consumer`: Tandem as an embedder gets it. Installs the build into a temporary prefix,
then, with nothing but that prefix:
  - compiles a file that includes tandem/tandem.h and tandem/tandem_c.h with only
    -I PREFIX/include (C++17 and C++20), and tandem_c.h alone as C99 and C11 (-pedantic
    -Werror): the public headers need only the standard library;
  - builds generate.cpp with find_package(tandem) (shared and static), and generate.c with
    pkg-config (tandem.pc: shared; tandem-static.pc: static, with and without --static), runs
    each on the aidreams model and checks the ids and text against llama2.c's greedy reference;
  - imports the installed Python package (no TANDEM_LIBRARY) and checks it finds the
    installed libtandem.so and gives the same tokens.
"""

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run(command, **kwargs):
    """Runs a command (a list), echoing it; fails the test with its output if it fails."""
    print("+", " ".join(shlex.quote(str(c)) for c in command), flush=True)
    result = subprocess.run([str(c) for c in command], capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.exit(f"FAILED ({result.returncode}): {result.stdout}\n{result.stderr}")
    return result


def check(condition, message):
    if not condition:
        sys.exit("FAILED: " + message)


def check_output(name, output, reference):
    ids_line, _, text = output.partition("\n")
    ids = [int(token) for token in ids_line.split()]
    check(ids == reference["ids"], f"{name}: ids differ from the reference\n  got  {ids}\n  want {reference['ids']}")
    check(text == reference["text"], f"{name}: text differs from the reference\n  got  {text!r}\n  want {reference['text']!r}")
    print(f"{name}: the greedy reference, {len(ids)} ids", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build-dir", required=True)
    parser.add_argument("--source-dir", default=str(HERE))
    parser.add_argument("--cmake", default="cmake")
    parser.add_argument("--cxx", default=os.environ.get("CXX", "c++"))
    parser.add_argument("--cc", default=os.environ.get("CC", "cc"))
    parser.add_argument("--shared-dir", required=True)
    args = parser.parse_args()

    model = Path(args.shared_dir) / "models" / "aidreams260K" / "model.gguf"
    reference_file = model.parent / "greedy-reference.jsonl"
    # CTest treats this output as a skip (SKIP_REGULAR_EXPRESSION in cmake/library_tests.cmake).
    if not model.exists() or not reference_file.exists():
        print(f"SKIPPED: {model} or its reference is not present (see ../shared/README.md)")
        return
    references = [json.loads(line) for line in reference_file.read_text().splitlines() if line.strip()]
    reference = next(r for r in references if r["prompt"] == "The dream")

    with tempfile.TemporaryDirectory(prefix="tandem-consumer-") as temp:
        temp = Path(temp)
        prefix = temp / "prefix"
        run([args.cmake, "--install", args.build_dir, "--prefix", prefix])

        # The installed tree.
        pc_files = list(prefix.glob("lib*/**/pkgconfig/tandem.pc"))
        check(len(pc_files) == 1, f"expected one tandem.pc under {prefix}, found {pc_files}")
        libdir = pc_files[0].parent.parent
        for relative in ["include/tandem/tandem.h", "include/tandem/tandem_c.h", "bin/tandem",
                         "lib/python3/dist-packages/tandem/__init__.py"]:
            check((prefix / relative).is_file(), f"{relative} is not installed")
        for name in ["libtandem.a", "libtandem.so", "libtandem.so.0", "cmake/tandem/tandemConfig.cmake",
                     "cmake/tandem/tandemConfigVersion.cmake"]:
            check((libdir / name).exists(), f"{libdir / name} is not installed")
        if shutil.which("readelf"):
            dynamic = run(["readelf", "-d", libdir / "libtandem.so"]).stdout
            check("Library soname: [libtandem.so.0]" in dynamic, "libtandem.so has no SONAME libtandem.so.0")
            symbols = run(["readelf", "--dyn-syms", "--wide", libdir / "libtandem.so"]).stdout
            check("tandem_generate" in symbols, "tandem_generate is not exported")
            # Internals stay hidden: e.g. the internal tokenizer (tandem::Tokenizer, _ZN6tandem9Tokenizer...).
            check("_ZN6tandem9Tokenizer" not in symbols, "internal symbols are exported")

        # The public headers need nothing but the standard library.
        include = ["-I", prefix / "include"]
        both = temp / "both_headers.cpp"
        both.write_text("#include <tandem/tandem.h>\n#include <tandem/tandem_c.h>\nint main() { return 0; }\n")
        for standard in ["c++17", "c++20"]:
            run([args.cxx, f"-std={standard}", "-Wall", "-Wextra", "-Werror", "-pedantic", "-fsyntax-only", *include, both])
        c_header = temp / "c_header.c"
        c_header.write_text("#include <tandem/tandem_c.h>\nint main(void) { return tandem_version() == 0; }\n")
        for standard in ["c99", "c11"]:
            run([args.cc, f"-std={standard}", "-Wall", "-Wextra", "-Werror", "-pedantic", "-fsyntax-only", *include, c_header])

        # C++ with find_package(tandem).
        build = temp / "cpp-build"
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        run([args.cmake, "-S", args.source_dir, "-B", build, *generator, f"-DCMAKE_PREFIX_PATH={prefix}",
             f"-DCMAKE_CXX_COMPILER={args.cxx}", "-DCMAKE_BUILD_TYPE=Release"])
        run([args.cmake, "--build", build, "-j", "2"])
        prompt = reference["prompt"]
        for name in ["generate_shared", "generate_static"]:
            check_output(f"C++ {name} (find_package)", run([build / name, model, prompt]).stdout, reference)
        needed = run(["ldd", build / "generate_shared"]).stdout if shutil.which("ldd") else str(libdir)
        check(str(libdir) in needed, "generate_shared does not load the installed libtandem.so")

        # C with pkg-config.
        env = dict(os.environ, PKG_CONFIG_PATH=str(libdir / "pkgconfig"))
        flags = shlex.split(run(["pkg-config", "--cflags", "--libs", "tandem"], env=env).stdout)
        shared_c = temp / "generate_c"
        run([args.cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", HERE / "generate.c", "-o", shared_c,
             *flags, f"-Wl,-rpath,{libdir}"])
        check_output("C (pkg-config)", run([shared_c, model, prompt]).stdout, reference)
        # --static on tandem.pc adds the private dependencies but cannot make -ltandem pick the
        # archive over the .so: tandem-static.pc names libtandem.a (with or without --static).
        for static_args in (["--static"], []):
            static_flags = shlex.split(
                run(["pkg-config", *static_args, "--cflags", "--libs", "tandem-static"], env=env).stdout)
            archive = (libdir / "libtandem.a").resolve()
            check(any(Path(flag).resolve() == archive for flag in static_flags if flag.endswith("libtandem.a"))
                  and "-ltandem" not in static_flags,
                  f"pkg-config {static_args} tandem-static does not name libtandem.a: {static_flags}")
        static_c = temp / "generate_c_static"
        run([args.cc, "-std=c11", HERE / "generate.c", "-o", static_c, *static_flags])
        check("libtandem.so" not in run(["ldd", static_c]).stdout if shutil.which("ldd") else True,
              "the static C program loads libtandem.so")
        check_output("C static (pkg-config --static tandem-static)", run([static_c, model, prompt]).stdout, reference)

        # The installed Python package finds the installed library by itself.
        python_env = {k: v for k, v in os.environ.items() if k not in ("TANDEM_LIBRARY", "PYTHONPATH")}
        python_env["PYTHONPATH"] = str(prefix / "lib" / "python3" / "dist-packages")
        python_env["PYTHONDONTWRITEBYTECODE"] = "1"
        script = ("import sys, tandem\n"
                  "m = tandem.Model(sys.argv[1], threads=1)\n"
                  "r = m.generate(sys.argv[2], max_tokens=1000, temperature=0)\n"
                  "print(tandem._native.lib._name)\n"
                  "print(' '.join(map(str, m.tokenize(sys.argv[2]) + r.tokens)))\n"
                  "sys.stdout.write(sys.argv[2] + r.text)\n")
        output = run([sys.executable, "-c", script, model, prompt], env=python_env, cwd=temp).stdout
        library, _, rest = output.partition("\n")
        check(library.startswith(str(prefix)), f"the installed package loaded {library}, not the installed library")
        check_output("Python (installed package)", rest, reference)
    print("consumer: all passed")


if __name__ == "__main__":
    main()
