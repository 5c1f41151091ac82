# Sourced by the npm peers' set-up scripts (setup_ort.sh, setup_llama_cpp.sh):
#   ensure_node WHO   installs Debian's nodejs and npm when either is missing; returns 1, with one line
#                     "WHO: no node / npm ..." on stderr, when they cannot be had.
#   npm_project DIR   makes DIR an npm project of its own (a private package.json) to install into.
ensure_node() {
  if command -v node >/dev/null && command -v npm >/dev/null; then
    return 0
  fi
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "$1: installing nodejs npm" >&2
  { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
      nodejs npm; } >&2 || true
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "$1: no node / npm (Debian's nodejs, npm could not be installed)" >&2
    return 1
  fi
}

npm_project() {
  mkdir -p "$1"
  [ -f "$1/package.json" ] || echo '{"private": true}' > "$1/package.json"
}
