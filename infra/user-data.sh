#!/usr/bin/env bash
# Writes the runner launch template's user data in template.yaml from
# infra/runner/bootstrap.sh: the literal block that ends the UserData's Fn::Join becomes
# the script without its comment lines (all but the #! line: EC2 takes 16 KB of user data,
# and the comments are a fifth of the script), indented, every other line of the template
# as it was.
#
#   infra/user-data.sh           rewrites template.yaml (make user-data)
#   infra/user-data.sh --check   fails if template.yaml is not what it would write
#                                (make lint-infra)
set -euo pipefail

cd "$(dirname "$0")/.."
template=template.yaml
script=infra/runner/bootstrap.sh

# The template with the first literal block ("- |") after "UserData:" replaced by the
# script less its comment lines, indented two columns deeper than its "- |"; the blank lines that follow the
# block are kept.
render() {
  awk -v script="$script" '
    function emit(line) {
      n = 0
      while ((getline line < script) > 0)
        if (++n == 1 || line !~ /^[[:space:]]*#/) print (line == "" ? "" : pad line)
      close(script)
    }
    state == 0 && /UserData:/ { state = 1 }
    state == 1 && /^ *- \|$/ {
      print
      match($0, /^ */)
      pad = ""
      for (i = 0; i < RLENGTH + 2; i++) pad = pad " "
      emit()
      state = 2
      next
    }
    state == 2 {
      if ($0 == "") { blanks++; next }
      if (index($0, pad) == 1) { blanks = 0; next }
      for (; blanks > 0; blanks--) print ""
      state = 3
    }
    { print }
    END {
      if (state < 2) { print "no literal block after UserData: in the template" > "/dev/stderr"; exit 1 }
    }
  ' "$template"
}

rendered="$(mktemp)"
trap 'rm -f "$rendered"' EXIT
render > "$rendered"

if [[ "${1:-}" == "--check" ]]; then
  if ! cmp -s "$rendered" "$template"; then
    echo "template.yaml's user data is not infra/runner/bootstrap.sh: run make user-data" >&2
    diff -u "$template" "$rendered" | head -n 40 >&2 || true
    exit 1
  fi
else
  cat "$rendered" > "$template"
fi
