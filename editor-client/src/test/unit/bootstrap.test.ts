import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
    BootstrapOptions,
    BootstrapResult,
    ENV_DIR,
    ProcessRunner,
    RunResult,
    STAMP_FILE,
    ensureServerEnvironment,
    findBundledWheel,
    isEnvironmentCurrent,
    noPythonMessage,
    probePython,
    runProcess,
    venvPython,
    wheelVersion,
} from '../../common/bootstrap';

const WHEEL_NAME = 'kernel_lsp-0.1.0-py3-none-any.whl';
const ok = (stdout = ''): RunResult => ({ exitCode: 0, stdout, stderr: '' });

/** The failure, or an assertion error naming what came instead. */
function failure(result: BootstrapResult): { reason: string; message: string } {
    if (result.kind !== 'failed') {
        assert.fail(`expected a failure, got ${JSON.stringify(result)}`);
    }
    return result;
}

interface Call {
    command: string;
    args: readonly string[];
}

/** Answers like a working python3.11 with venv and pip; `overrides` replace one step's answer. */
function scriptedRunner(calls: Call[], overrides: Partial<Record<'probe' | 'venv' | 'pip' | 'version', RunResult>> = {}): ProcessRunner {
    return (command, args, options) => {
        calls.push({ command, args });
        const step = args.includes('venv') ? 'venv' : args.includes('pip') ? 'pip' : args.includes('--version') ? 'version' : 'probe';
        const answer = overrides[step];
        if (answer) {
            return Promise.resolve(answer);
        }
        if (step === 'venv') {
            const envDir = args[args.length - 1];
            mkdirSync(join(envDir, 'bin'), { recursive: true });
            writeFileSync(venvPython(envDir, 'linux'), '');
        }
        if (step === 'pip') {
            options.onLine?.('Successfully installed kernel-lsp-0.1.0');
        }
        return Promise.resolve(
            { probe: ok('3.11.7\n/usr/bin/python3.11\n'), venv: ok(), pip: ok(), version: ok('kernel-lsp 0.1.0\n') }[step],
        );
    };
}

describe('ensureServerEnvironment (scripted processes)', function () {
    if (process.platform === 'win32') {
        return; // The scripted venv lays out bin/python.
    }
    let root: string;
    let wheel: string;
    let logged: string[];
    let progress: string[];

    beforeEach(() => {
        root = mkdtempSync(join(tmpdir(), 'kernel-lsp-bootstrap-'));
        mkdirSync(join(root, 'bundled'));
        wheel = join(root, 'bundled', WHEEL_NAME);
        writeFileSync(wheel, 'wheel bytes v1');
        logged = [];
        progress = [];
    });
    afterEach(() => {
        rmSync(root, { recursive: true, force: true });
    });

    const options = (runner: ProcessRunner, basePythons: string[][] = [['python3']]): BootstrapOptions => ({
        basePythons,
        storageDir: join(root, 'storage'),
        wheel,
        env: { PATH: '/usr/bin' },
        cwd: root,
        log: (line) => logged.push(line),
        progress: (message) => progress.push(message),
        runner,
    });

    it('creates a venv, installs the wheel with pip, checks --version, every step isolated (-I)', async () => {
        const calls: Call[] = [];
        const result = await ensureServerEnvironment(options(scriptedRunner(calls)));
        const envDir = join(root, 'storage', ENV_DIR);
        const python = venvPython(envDir);
        assert.deepEqual(result, { kind: 'ready', python: [python], installed: true });
        assert.deepEqual(
            calls.map((call) => [call.command, ...call.args.filter((arg) => !arg.startsWith('import sys'))]),
            [
                ['python3', '-I', '-c'],
                ['/usr/bin/python3.11', '-I', '-m', 'venv', envDir],
                [python, '-I', '-m', 'pip', 'install', '--disable-pip-version-check', '--no-input', '--progress-bar', 'off', wheel],
                [python, '-I', '-m', 'kernel_lsp', '--version'],
            ],
        );
        assert.ok(logged.includes('Successfully installed kernel-lsp-0.1.0'), "pip's output goes to the log");
        assert.ok(progress.some((message) => /PyPI/.test(message)), 'the progress says the dependencies come from PyPI');
        assert.ok(existsSync(join(envDir, STAMP_FILE)));
        assert.ok(!existsSync(join(root, 'storage', 'server-env.lock')), 'the lock is released');
    });

    it('reuses an environment that holds this wheel, and reinstalls when the wheel changes', async () => {
        await ensureServerEnvironment(options(scriptedRunner([])));
        assert.ok(isEnvironmentCurrent(join(root, 'storage'), wheel));

        const again: Call[] = [];
        const reused = await ensureServerEnvironment(options(scriptedRunner(again)));
        assert.equal(reused.kind === 'ready' && reused.installed, false);
        assert.deepEqual(again, [], 'nothing runs when the environment is current');

        writeFileSync(wheel, 'wheel bytes v2, same version number');
        assert.ok(!isEnvironmentCurrent(join(root, 'storage'), wheel));
        const updated = await ensureServerEnvironment(options(scriptedRunner([])));
        assert.equal(updated.kind === 'ready' && updated.installed, true);
    });

    it('says which Python to install when none is usable, and creates nothing', async () => {
        const missing: RunResult = { exitCode: null, stdout: '', stderr: '', spawnError: 'ENOENT: spawn python3' };
        const result = await ensureServerEnvironment(
            options(scriptedRunner([], { probe: missing }), [['/opt/py/bin/python'], ['python3']]),
        );
        const { reason, message } = failure(result);
        assert.equal(reason, 'noPython');
        assert.match(message, /needs Python 3\.10 or newer/);
        assert.match(message, /tried \/opt\/py\/bin\/python, python3/);
        assert.match(message, /sudo apt install python3 python3-venv/);
        assert.ok(!existsSync(join(root, 'storage', ENV_DIR)));
    });

    it('names the version of a Python that is too old', async () => {
        const old = ok('3.8.10\n/usr/bin/python3.8\n');
        const result = await ensureServerEnvironment(options(scriptedRunner([], { probe: old })));
        assert.match(failure(result).message, /\/usr\/bin\/python3\.8 is Python 3\.8\.10/);
    });

    it('points Debian users at python3-venv when venv has no ensurepip', async () => {
        const noEnsurepip: RunResult = {
            exitCode: 1,
            stdout: 'The virtual environment was not created successfully because ensurepip is not available.',
            stderr: '',
        };
        const result = await ensureServerEnvironment(options(scriptedRunner([], { venv: noEnsurepip })));
        assert.equal(failure(result).reason, 'venv');
        assert.match(failure(result).message, /sudo apt install python3-venv/);
    });

    it('reports a failed pip install with its last line, and leaves no stamp (the next start retries)', async () => {
        const failed: RunResult = { exitCode: 1, stdout: '', stderr: 'Collecting pygls\nERROR: No matching distribution found for pygls' };
        const result = await ensureServerEnvironment(options(scriptedRunner([], { pip: failed })));
        assert.equal(failure(result).reason, 'pip');
        assert.match(failure(result).message, /No matching distribution found for pygls/);
        assert.ok(!existsSync(join(root, 'storage', ENV_DIR, STAMP_FILE)));
        assert.ok(!existsSync(join(root, 'storage', 'server-env.lock')));
    });

    it('does not accept an install whose server does not start', async () => {
        const broken: RunResult = { exitCode: 1, stdout: '', stderr: "ModuleNotFoundError: No module named 'pygls'" };
        const result = await ensureServerEnvironment(options(scriptedRunner([], { version: broken })));
        assert.equal(failure(result).reason, 'verify');
        assert.match(failure(result).message, /No module named 'pygls'/);
    });

    it('takes over a lock left by a window that died', async () => {
        const lock = join(root, 'storage', 'server-env.lock');
        mkdirSync(lock, { recursive: true });
        const longAgo = new Date(Date.now() - 3 * 3600_000);
        utimesSync(lock, longAgo, longAgo);
        const result = await ensureServerEnvironment(options(scriptedRunner([])));
        assert.equal(result.kind, 'ready');
    });
});

describe('bootstrap helpers', () => {
    it('finds the bundled wheel and reads its version', () => {
        const dir = mkdtempSync(join(tmpdir(), 'kernel-lsp-wheel-'));
        try {
            assert.equal(findBundledWheel(dir), undefined);
            assert.equal(findBundledWheel(join(dir, 'missing')), undefined);
            writeFileSync(join(dir, 'other-1.0-py3-none-any.whl'), '');
            writeFileSync(join(dir, WHEEL_NAME), '');
            assert.equal(findBundledWheel(dir), join(dir, WHEEL_NAME));
            assert.equal(wheelVersion(join(dir, WHEEL_NAME)), '0.1.0');
        } finally {
            rmSync(dir, { recursive: true, force: true });
        }
    });

    it("knows where a venv's python is on each platform", () => {
        assert.equal(venvPython('/s/env', 'linux'), '/s/env/bin/python');
        assert.equal(venvPython('/s/env', 'darwin'), '/s/env/bin/python');
        assert.match(venvPython('C:/s/env', 'win32'), /Scripts[\\/]python\.exe$/);
    });

    it('words the missing-Python message for a user who has none', () => {
        assert.match(noPythonMessage([['python3']], [{ kind: 'missing', detail: 'ENOENT' }]), /none was found \(tried python3\)/);
    });
});

describe('runProcess and probePython (real processes)', () => {
    const env = { PATH: process.env.PATH ?? '' };

    it('streams output lines and reports the exit status', async () => {
        const lines: string[] = [];
        const result = await runProcess(process.execPath, ['-e', 'console.log("one\\ntwo"); console.error("three"); process.exit(3)'], {
            cwd: tmpdir(),
            env,
            onLine: (line) => lines.push(line),
        });
        assert.equal(result.exitCode, 3);
        assert.deepEqual([...lines].sort(), ['one', 'three', 'two']);
        assert.equal(result.stdout, 'one\ntwo\n');
    });

    it('reports a program that cannot be started, without throwing', async () => {
        const result = await runProcess('/nonexistent/python', [], { cwd: tmpdir(), env });
        assert.equal(result.exitCode, null);
        assert.match(result.spawnError ?? '', /ENOENT/);
    });

    it("reads this machine's python3", async function () {
        try {
            execFileSync('python3', ['--version']);
        } catch {
            this.skip();
        }
        const probe = await probePython(['python3'], runProcess, { cwd: tmpdir(), env });
        if (probe.kind !== 'ok') {
            assert.fail(`python3 is not usable: ${JSON.stringify(probe)}`); // CI's Python is >= 3.10.
        }
        assert.match(probe.version, /^3\.\d+\.\d+$/);
        assert.equal((await probePython(['/nonexistent/python'], runProcess, { cwd: tmpdir(), env })).kind, 'missing');
    });
});
