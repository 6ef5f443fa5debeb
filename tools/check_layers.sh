#!/usr/bin/env bash
# Checks the package layers of docs/architecture.md on the whole dependency graph: every edge from a target in
# one top-level package to a target in another must be allowed by the table below. Prints each offending edge
# and exits 1; exit 0 with "layers: ok (...)"; exit 2 when bazel query itself fails.
#   bash tools/check_layers.sh
#
# Bazel visibility (package(default_visibility) in each BUILD.bazel) refuses most forbidden edges at build time,
# but only edge by edge and only as far as the BUILD files say: a target given a wider `visibility` (a public
# filegroup, an alias, a helper marked //visibility:public) lets a forbidden dependency through. This script
# reads the graph itself (`bazel query`, every configuration's select() branches, CUDA targets when the toolkit
# is present), so it also catches those. The allowed relation is transitive (props -> cli -> bench -> gpu/
# cpu_fast/cpu_ref -> core), so every forbidden transitive dependency (`deps(//gpu/...) intersect
# //cpu_ref/...` not empty) contains a forbidden direct edge, which is what gets printed.
set -uo pipefail
cd "$(dirname "$0")/.."

# package -> the packages it may depend on, besides itself, the data and build packages (testdata, tools,
# third_party, the root) and external repositories (@...). Keep in step with docs/architecture.md and each
# package's default_visibility.
layers='
core:
cpu_ref: core
cpu_fast: core
gpu: core
bench: core cpu_ref cpu_fast gpu
sim: core cpu_ref cpu_fast
replay: core cpu_ref cpu_fast gpu
cli: core cpu_ref cpu_fast gpu bench sim replay
props: core cpu_ref cpu_fast gpu bench cli sim replay
fuzz: core cpu_ref cpu_fast sim cli replay
testdata:
tools:
third_party:
(root):
'

# Narrow edges: package A may depend on package B only from (or only to) the targets named (a regex over labels).
# replay/ reaches gpu/ from its one GPU data path; props/ and fuzz/ reach cli/ through the command table (and the
# binary, for shell tests) only: the engines they test live below cli/.
narrow='
replay gpu from //replay:gpu_pool_path
props cli to //cli:(commands|kvshard)
fuzz cli to //cli:commands
'

# The universe: //... spelled as its top-level packages, skipping symlinks (bazel-* convenience links, which
# another output base would otherwise walk into) and hidden folders (.bundle/ from gpu_bundle.sh, .git/).
universe='//:*'
for d in */; do
  d=${d%/}
  [[ -L $d ]] && continue
  [[ -n $(find "$d" \( -name BUILD -o -name BUILD.bazel \) -print -quit) ]] && universe+=" + //$d/..."
done

err=$(mktemp)
trap 'rm -f "$err"' EXIT
graph=$(bazel query --noshow_progress --noimplicit_deps --output=graph --nograph:factored \
  "deps($universe)" 2>"$err") || {
  tail -20 "$err" >&2
  echo "check_layers: bazel query failed" >&2
  exit 2
}

printf '%s\n' "$graph" | awk -v layers="$layers" -v narrow="$narrow" '
  BEGIN {
    n = split(layers, lines, "\n")
    for (i = 1; i <= n; i++) {
      if (lines[i] !~ /:/) continue
      split(lines[i], kv, ":")
      known[kv[1]] = 1
      order[++count] = kv[1]
      m = split(kv[2], deps_of, " ")
      for (j = 1; j <= m; j++) allowed[kv[1], deps_of[j]] = 1
    }
    base["testdata"] = base["tools"] = base["third_party"] = base["(root)"] = 1
    n = split(narrow, nl, "\n")
    for (i = 1; i <= n; i++) {
      if (split(nl[i], w, " ") == 4) { only_side[w[1], w[2]] = w[3]; only_through[w[1], w[2]] = w[4] }
    }
    bad = 0; edges = 0
  }
  # The top-level package of a label: //cpu_ref:x -> cpu_ref, //third_party/cuda:x -> third_party, //:x -> (root);
  # "@" for external repositories.
  function pkg(label,   p) {
    if (label ~ /^@/) return "@"
    p = label; sub(/^\/\//, "", p); sub(/[:\/].*$/, "", p)
    return p == "" ? "(root)" : p
  }
  function layer_list(p,   s, i) {
    s = ""
    for (i = 1; i <= count; i++) if ((p, order[i]) in allowed) s = s (s == "" ? "" : ", ") order[i] "/"
    return s == "" ? "no layer of the project" : s " only"
  }
  # Every node: a top-level package missing from the table fails once, naming it.
  /^  "/ {
    for (f = 1; f <= NF; f += 2) {
      label = $f; gsub(/"/, "", label); p = pkg(label)
      if (p != "@" && !(p in known) && !(p in unknown)) {
        printf "check_layers: package %s/ (%s) has no layer: add it to tools/check_layers.sh and %s\n", p, label,
          "docs/architecture.md"
        unknown[p] = 1
        bad++
      }
    }
  }
  / -> / {
    from = $1; to = $3; gsub(/"/, "", from); gsub(/"/, "", to)
    a = pkg(from); b = pkg(to)
    if (b == "@" || a == b) next
    edges++
    if (a == "@") {
      printf "check_layers: forbidden edge %s -> %s (an external repository depends on the project)\n", from, to
      bad++
    } else if ((a in known) && (b in known) && !(b in base) && !((a, b) in allowed)) {
      printf "check_layers: forbidden edge %s -> %s (%s/ may depend on %s)\n", from, to, a, layer_list(a)
      bad++
    } else if (((a, b) in only_through) && (only_side[a, b] == "from" ? from : to) !~ ("^" only_through[a, b] "$")) {
      printf "check_layers: forbidden edge %s -> %s (%s/ reaches %s/ only %s %s)\n", from, to, a, b,
        only_side[a, b], only_through[a, b]
      bad++
    }
  }
  END {
    if (bad) {
      printf "check_layers: %d problem(s); the allowed layers are in docs/architecture.md\n", bad
      exit 1
    }
    printf "layers: ok (%d edges between packages checked)\n", edges
  }
' || exit 1

# The engines below the CLI parse no flags: nothing in replay/ or sim/ reaches Boost (Program_options is the CLI's).
for engine in replay sim; do
  boost=$(bazel query --noshow_progress "somepath(//$engine/..., @boost//:all)" 2>"$err") || {
    tail -20 "$err" >&2
    echo "check_layers: bazel query failed" >&2
    exit 2
  }
  if [[ -n $boost ]]; then
    printf 'check_layers: //%s depends on Boost:\n%s\n' "$engine" "$boost"
    exit 1
  fi
done
