// The server's own Python environment, so that the .vsix works with no prior Python setup: when
// nothing is configured and `kernel_lsp` does not import in the chosen Python, the extension creates
// a venv in its global storage and pip-installs the wheel bundled in the .vsix into it; the wheel's
// dependencies (pygls, cuda-bindings, the CUDA toolkit wheels, ...) come from PyPI at that moment.
//
// Why a venv at first start rather than bundled libraries (what the python-tools template and
// vscode-ruff do: `pip install -t bundled/libs` at build time, or a platform-specific binary): the
// server's dependencies are about 0.7 GB of platform-specific CUDA wheels, too big for a .vsix and
// different per OS and Python version.
//
// No `vscode` import: the extension injects its output channel and progress, the unit tests a
// scripted runner, and scripts/check-bootstrap.mjs runs it for real into a fresh folder.

import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { SERVER_MODULE } from './constants';
import { formatCommand, isolatedPython } from './interpreter';

/** The oldest Python the server supports (pyproject.toml `requires-python`). */
export const MIN_PYTHON = [3, 10] as const;
/** The venv's folder inside the extension's global storage. */
export const ENV_DIR = 'server-env';
/** Written into the venv after a successful install: which wheel it holds. */
export const STAMP_FILE = 'kernel-lsp-bundle.json';
const LOCK_DIR = 'server-env.lock';

export interface RunResult {
    /** The exit status; null when the process could not start or was killed. */
    exitCode: number | null;
    stdout: string;
    stderr: string;
    /** Set when the program could not be started at all (ENOENT, EACCES). */
    spawnError?: string;
}

export interface RunOptions {
    cwd: string;
    env: Readonly<Record<string, string>>;
    /** Each line of output (stdout and stderr) as it arrives. */
    onLine?: (line: string) => void;
    timeoutMs?: number;
}

export type ProcessRunner = (command: string, args: readonly string[], options: RunOptions) => Promise<RunResult>;

/** Keeps the tail of a long output (pip prints thousands of lines) for error messages. */
const KEEP_CHARS = 64 * 1024;

/** The real runner: spawns without a shell, streams lines, never rejects. */
export const runProcess: ProcessRunner = (command, args, options) =>
    new Promise((resolve) => {
        let stdout = '';
        let stderr = '';
        let settled = false;
        const finish = (result: RunResult) => {
            if (!settled) {
                settled = true;
                clearTimeout(timer);
                resolve(result);
            }
        };
        const child = spawn(command, args, {
            cwd: options.cwd,
            env: options.env,
            windowsHide: true,
            stdio: ['ignore', 'pipe', 'pipe'],
        });
        const timer = options.timeoutMs ? setTimeout(() => child.kill(), options.timeoutMs) : undefined;
        const lineSplitter = (append: (text: string) => void) => {
            let partial = '';
            return {
                data: (chunk: Buffer) => {
                    const text = chunk.toString('utf8');
                    append(text);
                    const lines = (partial + text).split(/\r\n|\n|\r/);
                    partial = lines.pop() ?? '';
                    for (const line of lines) {
                        options.onLine?.(line);
                    }
                },
                end: () => {
                    if (partial !== '') {
                        options.onLine?.(partial);
                    }
                },
            };
        };
        const out = lineSplitter((text) => (stdout = (stdout + text).slice(-KEEP_CHARS)));
        const err = lineSplitter((text) => (stderr = (stderr + text).slice(-KEEP_CHARS)));
        child.stdout.on('data', out.data);
        child.stderr.on('data', err.data);
        child.on('error', (error: NodeJS.ErrnoException) => {
            finish({ exitCode: null, stdout, stderr, spawnError: `${error.code ?? 'error'}: ${error.message}` });
        });
        child.on('close', (code) => {
            out.end();
            err.end();
            finish({ exitCode: code, stdout, stderr });
        });
    });

export type PythonProbe =
    | { kind: 'ok'; version: string; executable: string }
    | { kind: 'tooOld'; version: string; executable: string }
    /** Could not be run, or is not a Python that understands `-I`. */
    | { kind: 'missing'; detail: string };

/** Runs `<python> -I -c ...` and reads its version and executable. */
export async function probePython(
    python: readonly string[],
    runner: ProcessRunner,
    options: Omit<RunOptions, 'onLine'>,
): Promise<PythonProbe> {
    const { command, args } = isolatedPython(python, [
        '-c',
        'import sys; print("%d.%d.%d" % sys.version_info[:3]); print(sys.executable)',
    ]);
    const result = await runner(command, args, { timeoutMs: 30_000, ...options });
    if (result.spawnError !== undefined || result.exitCode !== 0) {
        return { kind: 'missing', detail: result.spawnError ?? lastLines(result.stderr, 2) };
    }
    const [version = '', executable = ''] = result.stdout.trim().split(/\r?\n/);
    const [major, minor] = version.split('.').map(Number);
    if (!Number.isInteger(major) || !Number.isInteger(minor)) {
        return { kind: 'missing', detail: `unexpected output: ${result.stdout.trim()}` };
    }
    const recent = major > MIN_PYTHON[0] || (major === MIN_PYTHON[0] && minor >= MIN_PYTHON[1]);
    return { kind: recent ? 'ok' : 'tooOld', version, executable };
}

const INSTALL_PYTHON =
    'Install Python 3.10 or newer (Debian/Ubuntu: `sudo apt install python3 python3-venv`; Fedora: ' +
    '`sudo dnf install python3`; macOS: `brew install python` or python.org; Windows: python.org), or set ' +
    'kernelLsp.interpreter to one, then run kernel-lsp: Restart Server.';

/** What the user reads when no usable Python was found. */
export function noPythonMessage(tried: readonly (readonly string[])[], probes: readonly PythonProbe[]): string {
    const old = probes.find((probe) => probe.kind === 'tooOld');
    const found =
        old?.kind === 'tooOld'
            ? `${old.executable} is Python ${old.version}`
            : `none was found (tried ${tried.map((python) => formatCommand(python)).join(', ')})`;
    return `kernel-lsp needs Python ${MIN_PYTHON.join('.')} or newer to run its server, and ${found}. ${INSTALL_PYTHON}`;
}

/** The python of a venv, per platform. */
export function venvPython(envDir: string, platform: NodeJS.Platform = process.platform): string {
    return platform === 'win32' ? join(envDir, 'Scripts', 'python.exe') : join(envDir, 'bin', 'python');
}

/** `kernel_lsp-<version>-py3-none-any.whl` in `dir`, or undefined (a development build has none). */
export function findBundledWheel(dir: string): string | undefined {
    let names: string[];
    try {
        names = readdirSync(dir);
    } catch {
        return undefined;
    }
    const wheels = names.filter((name) => /^kernel_lsp-[^-]+-.+\.whl$/.test(name)).sort();
    return wheels.length > 0 ? join(dir, wheels[wheels.length - 1]) : undefined;
}

/** The version in a wheel's file name (`kernel_lsp-0.1.0-py3-none-any.whl` → `0.1.0`). */
export function wheelVersion(wheel: string): string {
    return basename(wheel).split('-')[1] ?? '';
}

interface Stamp {
    wheel: string;
    sha256: string;
}

function stampOf(wheel: string): Stamp {
    return { wheel: basename(wheel), sha256: createHash('sha256').update(readFileSync(wheel)).digest('hex') };
}

/**
 * Does `storageDir` hold an environment with exactly this wheel installed? A different wheel (the
 * extension was updated, or rebuilt with the same version number) means installing again.
 */
export function isEnvironmentCurrent(storageDir: string, wheel: string): boolean {
    const envDir = join(storageDir, ENV_DIR);
    try {
        const stamp = JSON.parse(readFileSync(join(envDir, STAMP_FILE), 'utf8')) as Partial<Stamp>;
        const expected = stampOf(wheel);
        return stamp.wheel === expected.wheel && stamp.sha256 === expected.sha256 && existsSync(venvPython(envDir));
    } catch {
        return false;
    }
}

function lastLines(text: string, count: number): string {
    return text.trim().split(/\r?\n/).slice(-count).join('\n');
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * One installer at a time across VS Code windows (they share the global storage): a folder made
 * with mkdir, which fails if it exists. A lock older than `staleMs` is from a window that died.
 */
async function acquireLock(lockDir: string, staleMs: number, waitMs: number, onWait: () => void): Promise<boolean> {
    const deadline = Date.now() + waitMs;
    let told = false;
    for (;;) {
        try {
            mkdirSync(lockDir);
            return true;
        } catch (error) {
            if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
                throw error;
            }
        }
        try {
            if (Date.now() - statSync(lockDir).mtimeMs > staleMs) {
                rmSync(lockDir, { recursive: true, force: true });
                continue;
            }
        } catch {
            continue; // Released between mkdir and stat.
        }
        if (Date.now() > deadline) {
            return false;
        }
        if (!told) {
            told = true;
            onWait();
        }
        await sleep(1000);
    }
}

export interface BootstrapOptions {
    /** Interpreters to build the venv from, in order of preference; the first usable one is taken. */
    basePythons: readonly (readonly string[])[];
    /** The extension's global storage folder (created if missing). */
    storageDir: string;
    /** The bundled wheel. */
    wheel: string;
    /** Environment for every process (the user's, so proxies and PIP_INDEX_URL apply). */
    env: Readonly<Record<string, string>>;
    /** Working directory for every process: outside any workspace. */
    cwd: string;
    /** pip's output and each command, for the output channel. */
    log: (line: string) => void;
    /** A short status for the progress notification. */
    progress: (message: string) => void;
    runner?: ProcessRunner;
    /** How long pip may take (default 30 minutes: 0.7 GB over a slow line). */
    installTimeoutMs?: number;
}

export type BootstrapResult =
    | { kind: 'ready'; python: string[]; installed: boolean }
    | { kind: 'failed'; reason: 'noPython' | 'venv' | 'pip' | 'verify' | 'busy'; message: string };

const SEE_LOG = 'The kernel-lsp output channel has the details.';

/**
 * Makes sure `<storageDir>/server-env` holds the bundled wheel, installed and importable, and
 * returns its python. Installs only when the environment is missing or holds another wheel.
 */
export async function ensureServerEnvironment(options: BootstrapOptions): Promise<BootstrapResult> {
    const runner = options.runner ?? runProcess;
    const envDir = join(options.storageDir, ENV_DIR);
    const python = venvPython(envDir);
    if (isEnvironmentCurrent(options.storageDir, options.wheel)) {
        return { kind: 'ready', python: [python], installed: false };
    }
    mkdirSync(options.storageDir, { recursive: true });
    const installTimeoutMs = options.installTimeoutMs ?? 30 * 60_000;
    const lockDir = join(options.storageDir, LOCK_DIR);
    const locked = await acquireLock(lockDir, installTimeoutMs + 10 * 60_000, installTimeoutMs + 10 * 60_000, () => {
        options.progress('Waiting for another VS Code window that is installing the server…');
    });
    if (!locked) {
        return { kind: 'failed', reason: 'busy', message: `kernel-lsp: another window holds ${lockDir}; remove it if no install is running.` };
    }
    try {
        // Another window may have finished the install while this one waited.
        if (isEnvironmentCurrent(options.storageDir, options.wheel)) {
            return { kind: 'ready', python: [python], installed: false };
        }
        return await install(options, runner, envDir, python, installTimeoutMs);
    } finally {
        rmSync(lockDir, { recursive: true, force: true });
    }
}

async function install(
    options: BootstrapOptions,
    runner: ProcessRunner,
    envDir: string,
    python: string,
    installTimeoutMs: number,
): Promise<BootstrapResult> {
    const run = async (command: string, args: readonly string[], timeoutMs: number) => {
        options.log(`$ ${formatCommand([command, ...args])}`);
        const result = await runner(command, args, { cwd: options.cwd, env: options.env, onLine: options.log, timeoutMs });
        if (result.spawnError !== undefined) {
            options.log(result.spawnError);
        }
        return result;
    };

    const probes: PythonProbe[] = [];
    let base: readonly string[] | undefined;
    for (const candidate of options.basePythons) {
        const probe = await probePython(candidate, runner, { cwd: options.cwd, env: options.env });
        options.log(`${formatCommand(candidate)}: ${probe.kind === 'missing' ? `not usable (${probe.detail})` : `Python ${probe.version} (${probe.executable})`}`);
        probes.push(probe);
        if (probe.kind === 'ok') {
            base = [probe.executable];
            break;
        }
    }
    if (!base) {
        return { kind: 'failed', reason: 'noPython', message: noPythonMessage(options.basePythons, probes) };
    }

    options.progress('Creating a Python environment for the server…');
    rmSync(envDir, { recursive: true, force: true });
    const venv = isolatedPython(base, ['-m', 'venv', envDir]);
    const created = await run(venv.command, venv.args, 5 * 60_000);
    if (created.exitCode !== 0) {
        const noEnsurepip = /ensurepip/.test(created.stdout + created.stderr);
        const message = noEnsurepip
            ? `kernel-lsp: ${base[0]} cannot create a virtual environment (its venv module has no ensurepip). ` +
              'Debian/Ubuntu: `sudo apt install python3-venv`, then run kernel-lsp: Restart Server.'
            : `kernel-lsp: creating a virtual environment with ${base[0]} failed: ${lastLines(created.stderr, 2)} ${SEE_LOG}`;
        return { kind: 'failed', reason: 'venv', message };
    }

    const version = wheelVersion(options.wheel);
    options.progress(`Installing kernel-lsp ${version} and its dependencies from PyPI (about 0.7 GB, once)…`);
    const pip = isolatedPython([python], [
        '-m',
        'pip',
        'install',
        '--disable-pip-version-check',
        '--no-input',
        // Bars drawn for a terminal are noise in the output channel.
        '--progress-bar',
        'off',
        options.wheel,
    ]);
    const installed = await run(pip.command, pip.args, installTimeoutMs);
    if (installed.exitCode !== 0) {
        const why = installed.exitCode === null ? 'it was stopped' : `exit ${installed.exitCode}`;
        return {
            kind: 'failed',
            reason: 'pip',
            message:
                `kernel-lsp: pip could not install the server (${why}): ${lastLines(installed.stderr, 1)} ` +
                `It needs PyPI (or your PIP_INDEX_URL) for the dependencies. ${SEE_LOG}`,
        };
    }

    options.progress('Checking the server…');
    const versionCommand = isolatedPython([python], ['-m', SERVER_MODULE, '--version']);
    const check = await run(versionCommand.command, versionCommand.args, 60_000);
    if (check.exitCode !== 0 || !check.stdout.includes(`kernel-lsp ${version}`)) {
        return {
            kind: 'failed',
            reason: 'verify',
            message: `kernel-lsp: the installed server does not start (\`${SERVER_MODULE} --version\`: ${lastLines(check.stderr || check.stdout, 1)}). ${SEE_LOG}`,
        };
    }
    writeFileSync(join(envDir, STAMP_FILE), JSON.stringify(stampOf(options.wheel)));
    options.log(`Installed ${basename(options.wheel)} into ${envDir}`);
    return { kind: 'ready', python: [python], installed: true };
}
