#!/usr/bin/env bash
# The repository stands on its own: every path it names exists in it, and nothing points
# outside it or to a tracker it does not contain.
#
# Checks, over the files git tracks (and new files not ignored):
#   1. every repository path named in a code comment (.rs: the text after `//`), a doc (.md)
#      or a script (.sh, .ci/run) exists. A path is a word that starts with one of the
#      repository's top-level directories and ends either in a file name with an extension
#      (`docs/architecture.md`, `stack/src/pipeline.rs`, `scripts/e2e/tap.sh`) or in `/` (a
#      directory). Braces expand (`dpdk/src/{eal,mbuf}.rs`), `*` globs, and words with
#      `...` are skipped. A path git ignores (an output such as `fuzz/corpus/`) passes;
#   2. every relative link in a Markdown file (`[text](path)`) resolves to a file or
#      directory of the repository. The fragments in docs/lab/ are embedded in
#      docs/lab.md by scripts/lab/all.sh, so their links resolve from docs/;
#   3. no tracked file, except this one, mentions a numbered issue or session ("issue 3",
#      "session 12"), the origin's design and plan files, or its sibling folder of references
#      and field reports (the patterns below): a user who clones weir has none of them.
#
# Prints each problem as FILE:LINE: what, and exits 1 if there is any (0 otherwise).
# Needs only bash, git, grep and awk.
set -euo pipefail
cd "$(dirname "$0")/.."

self=scripts/check-paths.sh
mapfile -t all < <(git ls-files --cached --others --exclude-standard | sort -u)

# Every file and directory of the repository ("dir/" for directories).
declare -A known=()
for f in "${all[@]}"; do
  [ -e "$f" ] || continue
  known[$f]=1
  d=$f
  while [[ $d == */* ]]; do
    d=${d%/*}
    [ -n "${known[$d/]:-}" ] && break
    known[$d/]=1
  done
done

# The top-level directories, as an awk alternation ("." escaped as [.]).
tops=$(printf '%s\n' "${all[@]}" | awk -F/ 'NF > 1 {print $1}' | sort -u | sed 's/\./[.]/g' | paste -sd'|')

problems=0
report() { echo "$1"; problems=$((problems + 1)); }

# Brace expansion without eval: prints every expansion of $1 (nested braces allowed).
expand() {
  local s=$1
  if [[ $s != *'{'* ]]; then printf '%s\n' "$s"; return; fi
  local pre=${s%%\{*} rest=${s#*\{} depth=1 i c
  for ((i = 0; i < ${#rest}; i++)); do
    c=${rest:i:1}
    if [[ $c == '{' ]]; then depth=$((depth + 1)); fi
    if [[ $c == '}' ]]; then depth=$((depth - 1)); [ $depth -eq 0 ] && break; fi
  done
  if [ $depth -ne 0 ]; then printf '%s\n' "$s"; return; fi
  local inner=${rest:0:i} post=${rest:i+1} parts=() cur="" d=0 j p
  for ((j = 0; j < ${#inner}; j++)); do
    c=${inner:j:1}
    if [[ $c == '{' ]]; then d=$((d + 1)); fi
    if [[ $c == '}' ]]; then d=$((d - 1)); fi
    if [[ $c == ',' && $d -eq 0 ]]; then parts+=("$cur"); cur=""; else cur+=$c; fi
  done
  parts+=("$cur")
  for p in "${parts[@]}"; do expand "$pre$p$post"; done
}

# Does `path` (relative to the repository's root) name something in it?
exists() {
  local p=$1 g
  p=${p#./}
  if [[ $p == *'*'* ]]; then
    for g in $p; do [ -e "$g" ] && return 0; done
    return 1
  fi
  [ -n "${known[$p]:-}" ] || [ -n "${known[$p/]:-}" ] || { [[ $p == */ ]] && [ -n "${known[${p%/}]:-}" ]; } ||
    git check-ignore -q --no-index -- "$p"
}

# 1. Paths named in comments, docs and scripts.
scan=()
for f in "${all[@]}"; do
  [ -f "$f" ] || continue
  case $f in *.rs|*.md|*.sh|.ci/run) scan+=("$f") ;; esac
done
while IFS= read -r hit; do
  file=${hit%%:*} rest=${hit#*:}
  line=${rest%%:*} tok=${rest#*:}
  tok=${tok#[^A-Za-z.]}
  while [[ $tok == *[.,:\;] ]]; do tok=${tok%?}; done
  [[ $tok == *...* ]] && continue
  while IFS= read -r p; do
    if [[ $p != */ ]]; then
      last=${p##*/}
      [[ $last =~ \.[A-Za-z0-9]+$ ]] || continue
    fi
    exists "$p" || report "$file:$line: no such path in the repository: $p"
  done < <(expand "$tok")
done < <(awk -v re="(^|[^A-Za-z0-9_./\$~{}*-])($tops)/[A-Za-z0-9_./{},*-]*" '
  FNR == 1 { rs = (FILENAME ~ /\.rs$/) }
  {
    line = $0
    if (rs) { i = index(line, "//"); if (i == 0) next; line = substr(line, i + 2) }
    while (match(line, re)) {
      print FILENAME ":" FNR ":" substr(line, RSTART, RLENGTH)
      line = substr(line, RSTART + RLENGTH)
    }
  }' "${scan[@]}")

# 2. Relative links in Markdown.
normalise() { # a/b/../c/./d -> a/c/d; prints nothing if it climbs out of the root
  local IFS=/ part out=()
  for part in $1; do
    case $part in
      ''|.) ;;
      ..) [ ${#out[@]} -gt 0 ] || return 1; unset 'out[${#out[@]}-1]' ;;
      *) out+=("$part") ;;
    esac
  done
  printf '%s' "${out[*]}"
}
for f in "${all[@]}"; do
  [[ $f == *.md && -f $f ]] || continue
  dir=$(dirname "$f")
  [ "$dir" = docs/lab ] && dir=docs
  while IFS= read -r hit; do
    line=${hit%%:*} target=${hit#*:}
    target=${target#](} target=${target%)}
    target=${target%%#*}
    case $target in ''|http:*|https:*|mailto:*|*://*) continue ;; esac
    if [[ $target == /* ]]; then resolved=${target#/}; else resolved=$(normalise "$dir/$target") || resolved=""; fi
    if [ -z "$resolved" ] || ! exists "$resolved"; then
      report "$f:$line: link to something outside the repository or missing: $target"
    fi
  done < <(grep -noE '\]\([^)[:space:]]+\)' "$f")
done

# 3. Mentions of what a clone does not have.
while IFS= read -r hit; do
  report "$hit"
done < <(git grep -nIE --untracked \
  -e '(^|[^A-Za-z])[Ii]ssues? [0-9]' -e '(^|[^A-Za-z])[Ss]essions? [0-9]' \
  -e 'DESIG[N]\.md' -e 'PLA[N]\.md' -e '\.\./s[h]ared' -e 's[h]ared/(reference|seeds)' \
  -- . ":(exclude)$self" | sed -E 's/^([^:]+:[0-9]+):[[:space:]]*/\1: mentions what a clone does not have: /')

if [ $problems -gt 0 ]; then
  echo "check-paths: $problems problem(s)" >&2
  exit 1
fi
echo "check-paths: every path named exists; no mention of issues, sessions or files outside the repository"
