// Builds the server's wheel into editor-client/bundled/ for `npm run package`: the .vsix ships it,
// and on first start the extension installs it into its own environment (src/common/bootstrap.ts).
//
// The wheel is built from a copy of the checkout's files (`git ls-files`: tracked, plus untracked
// ones git does not ignore), not from the checkout itself: setuptools reuses a `build/` folder
// left by an earlier build, which would put modules deleted since then into the wheel.
//
// Environment: KERNEL_LSP_BUILD_PYTHON, the Python whose pip builds the wheel (default python3).

import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const clientDir = dirname(dirname(fileURLToPath(import.meta.url)));
const repoDir = dirname(clientDir);
const bundledDir = join(clientDir, 'bundled');
const python = process.env.KERNEL_LSP_BUILD_PYTHON ?? 'python3';

function sourceFiles() {
    const listed = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
        cwd: repoDir,
        maxBuffer: 64 * 1024 * 1024,
    });
    return listed
        .toString('utf8')
        .split('\0')
        .filter((path) => path !== '' && !path.startsWith('editor-client/') && existsSync(join(repoDir, path)));
}

const source = mkdtempSync(join(tmpdir(), 'kernel-lsp-wheel-src-'));
try {
    for (const path of sourceFiles()) {
        if (!statSync(join(repoDir, path)).isFile()) {
            continue; // A submodule or a symlink to a folder: nothing the wheel needs.
        }
        mkdirSync(join(source, dirname(path)), { recursive: true });
        copyFileSync(join(repoDir, path), join(source, path));
    }
    rmSync(bundledDir, { recursive: true, force: true });
    mkdirSync(bundledDir, { recursive: true });
    execFileSync(
        python,
        ['-m', 'pip', 'wheel', '--no-deps', '--disable-pip-version-check', '--quiet', '--wheel-dir', bundledDir, source],
        { stdio: 'inherit' },
    );
} finally {
    rmSync(source, { recursive: true, force: true });
}

const wheels = readdirSync(bundledDir).filter((name) => /^kernel_lsp-.+\.whl$/.test(name));
if (wheels.length !== 1) {
    console.error(`build-wheel: expected one kernel_lsp wheel in ${bundledDir}, found: ${wheels.join(', ') || 'none'}`);
    process.exit(1);
}
console.log(`build-wheel: ${join('bundled', wheels[0])} (${Math.round(statSync(join(bundledDir, wheels[0])).size / 1024)} KiB)`);
