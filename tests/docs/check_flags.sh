#!/usr/bin/env bash
# Every long flag that `cleave SUB --help` lists is documented somewhere in docs/*.md.
#   tests/docs/check_flags.sh CLEAVE DOCS_DIR
# Reads the subcommands from the Subcommands section of `CLEAVE --help` (CLI11's format), and
# recurses into nested ones (`hw list`, `stack show`). A flag counts as documented when the exact
# string `--name` appears in a doc, not followed by another name character (so `--recompute` is
# not found inside `--recompute-method`). --help is ignored. Exit 1 lists each missing
# `SUB --flag`; exit 2 on bad usage or when no subcommand or flag could be read.
set -euo pipefail

if [[ $# -ne 2 || ! -x $1 || ! -d $2 ]]; then
  echo "usage: $0 CLEAVE_BINARY DOCS_DIR" >&2
  exit 2
fi
cleave=$1
docs=$2
shopt -s nullglob
doc_files=("$docs"/*.md)
if [[ ${#doc_files[@]} -eq 0 ]]; then
  echo "$0: no *.md in $docs" >&2
  exit 2
fi

# The names listed under a "Subcommands:" header of one --help text (CLI11: "  name  description").
subcommands_of() {
  awk '/^[A-Za-z][A-Za-z ]*:$/ { in_subs = ($0 ~ /^(Subcommands|SUBCOMMANDS):$/); next }
       in_subs && /^  [a-z]/ { print $1 }' <<<"$1"
}

# The long option names of one --help text: the names in its option column, e.g.
# "  -o,--out TEXT REQUIRED", "  --gpus INT:POSITIVE", not flags its descriptions mention.
flags_of() {
  grep -oE '^[[:space:]]+(-[A-Za-z0-9],)?--[a-z0-9][a-z0-9-]*(,--[a-z0-9][a-z0-9-]*)*' <<<"$1" |
    grep -oE -- '--[a-z0-9][a-z0-9-]*' | sort -u
}

# Every `--name` the docs hold, read once (one grep per flag forked ~500 greps: 13.5 s of a CI
# run, issue 49). grep -o takes the longest name at each place, so a flag is documented when it
# is one of these names whole, as the rule above says.
declare -A in_docs=()
while IFS= read -r name; do
  in_docs[${name#?}]=1  # drop the character before the dashes (or the line's first dash-less char)
done < <(sed 's/^/ /' "${doc_files[@]}" | grep -oE -- '[^a-z0-9-]--[a-z0-9][a-z0-9-]*' | sort -u)

documented() {
  [[ -n ${in_docs[$1]+x} ]]
}

missing=0
checked=0
check_command() {  # check_command "sub [subsub]"
  local path=$1 help flag sub
  # shellcheck disable=SC2086  # path is one or two words
  help=$("$cleave" $path --help 2>&1) || { echo "$0: '$cleave $path --help' failed" >&2; exit 2; }
  for flag in $(flags_of "$help"); do
    [[ $flag == --help ]] && continue
    checked=$((checked + 1))
    if ! documented "$flag"; then
      echo "undocumented: $path $flag"
      missing=$((missing + 1))
    fi
  done
  for sub in $(subcommands_of "$help"); do
    check_command "$path $sub"
  done
}

top=$("$cleave" --help 2>&1) || { echo "$0: '$cleave --help' failed" >&2; exit 2; }
subs=$(subcommands_of "$top")
if [[ -z $subs ]]; then
  echo "$0: no subcommands found in '$cleave --help'" >&2
  exit 2
fi
for flag in $(flags_of "$top"); do  # the top level's own flags (--version)
  [[ $flag == --help ]] && continue
  checked=$((checked + 1))
  documented "$flag" || { echo "undocumented: cleave $flag"; missing=$((missing + 1)); }
done
for sub in $subs; do
  check_command "$sub"
done

if [[ $checked -eq 0 ]]; then
  echo "$0: no flags found in any --help" >&2
  exit 2
fi
if [[ $missing -gt 0 ]]; then
  echo "$missing of $checked flags are not documented in $docs/*.md" >&2
  exit 1
fi
echo "all $checked flags documented in $docs/*.md"
