#!/usr/bin/env bash
# Writes the runner launch template's user data in template.yaml from
# infra/runner/bootstrap.sh: the literal block that ends the UserData's Fn::Join becomes
# the script without its comment lines (all but the #! line) and without its lines'
# indentation, indented, every other line of the template as it was. EC2 takes 16 KB of
# user data ("User data is limited to 16 KB, in raw form, before it is base64-encoded",
# https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-add-user-data.html):
# the comments are a fifth of the script, the indentation a twentieth. Neither changes
# what bash runs, as the script has no heredoc and no quoted string running on over a
# line's indentation; tests/bootstrap boots the stripped copy to show it.
#
#   infra/user-data.sh           rewrites template.yaml (make user-data)
#   infra/user-data.sh --check   fails if template.yaml is not what it would write
#                                (make lint-infra)
#   infra/user-data.sh --script  prints the script as the user data holds it
set -euo pipefail

cd "$(dirname "$0")/.."
template=template.yaml
script=infra/runner/bootstrap.sh

# The script less its comment lines (but the #! line) and its lines' indentation.
stripped() {
  awk 'NR == 1 || !/^[[:space:]]*#/ { if (NR > 1) sub(/^[[:space:]]+/, ""); print }' "$script"
}

# The template with the first literal block ("- |") after "UserData:" replaced by the
# stripped script, indented two columns deeper than its "- |"; the blank lines that follow
# the block are kept.
render() {
  awk -v script="$1" '
    function emit(line) {
      while ((getline line < script) > 0)
        print (line == "" ? "" : pad line)
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

if [[ "${1:-}" == "--script" ]]; then
  stripped
  exit 0
fi
rendered="$(mktemp)"
copy="$(mktemp)"
trap 'rm -f "$rendered" "$copy"' EXIT
stripped > "$copy"
render "$copy" > "$rendered"

if [[ "${1:-}" == "--check" ]]; then
  if ! cmp -s "$rendered" "$template"; then
    echo "template.yaml's user data is not infra/runner/bootstrap.sh: run make user-data" >&2
    diff -u "$template" "$rendered" | head -n 40 >&2 || true
    exit 1
  fi
else
  cat "$rendered" > "$template"
fi
