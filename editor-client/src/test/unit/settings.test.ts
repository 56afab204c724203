import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_SETTINGS, expandPath, normalizeSettings, toServerLaunchOptions } from '../../common/settings';

interface Manifest {
    contributes: { configuration: { properties: Record<string, { default: unknown }> } };
}
// Compiled to out/test/unit/: the extension's folder is three levels up.
const manifest = JSON.parse(readFileSync(join(__dirname, '..', '..', '..', 'package.json'), 'utf8')) as Manifest;

const context = { workspaceFolder: '/ws', userHome: '/home/me' };

describe('normalizeSettings', () => {
    it('gives the defaults for an empty or missing section', () => {
        assert.deepEqual(normalizeSettings(undefined, context), DEFAULT_SETTINGS);
        assert.deepEqual(normalizeSettings({}, context), DEFAULT_SETTINGS);
    });

    it('keeps every valid setting, nested like workspace/configuration returns it', () => {
        const raw = {
            server: { path: ['kernel-lsp'] },
            interpreter: ['/venv/bin/python'],
            arch: ['sm_90', 'sm_80'],
            includeDirs: ['${workspaceFolder}/include', '~/cutlass/include', '/abs'],
            defines: ['BLOCK=256'],
            defaultDevice: true,
            compiler: 'nvcc',
            hostCheck: true,
            compileCommands: '${workspaceFolder}/build',
            exclude: ['third_party', 'legacy/**'],
            maxFileBytes: 1048576,
            workerIdleSeconds: 0,
            startupCheckFiles: 0,
            checkTimeoutSeconds: 30,
            compileMemoryMB: 0,
            compileCommandsMaxBytes: 1024,
            compileTimeoutSeconds: 180,
            checkOn: 'change',
            gpu: { enabled: false, device: 1, devices: 'all', achievedOccupancy: false },
            evaluation: { backend: 'ray' },
            cluster: { address: 'ray://head:10001' },
            llm: { baseUrl: 'http://localhost:8000/v1', model: 'qwen' },
            optimizer: { rounds: 5, candidates: 8, proposer: 'tune', allowNewGlobals: true },
            specs: { run: 'never' },
            clangd: { enabled: false, diagnostics: 'agreeing', backgroundIndex: true, path: '~/llvm/bin/clangd' },
            trace: { server: 'verbose' },
        };
        assert.deepEqual(normalizeSettings(raw, context), {
            ...raw,
            includeDirs: ['/ws/include', '/home/me/cutlass/include', '/abs'],
            compileCommands: '/ws/build',
            clangd: { ...raw.clangd, path: '/home/me/llvm/bin/clangd' },
        });
    });

    it('falls back to defaults for values of the wrong type or out of range', () => {
        const settings = normalizeSettings(
            {
                server: { path: 'kernel-lsp' },
                arch: 90,
                includeDirs: [1, '', 'inc'],
                checkOn: 'always',
                compiler: 'gcc',
                hostCheck: 'yes',
                exclude: 'legacy',
                maxFileBytes: -5,
                workerIdleSeconds: 1.5,
                startupCheckFiles: -1,
                checkTimeoutSeconds: 0,
                compileMemoryMB: -1,
                compileTimeoutSeconds: -3,
                gpu: { enabled: 'no', device: -1, devices: 0, achievedOccupancy: 'yes' },
                evaluation: { backend: 'slurm' },
                cluster: { address: '  ' },
                llm: { baseUrl: '', model: 42 },
                optimizer: { rounds: 0, candidates: 2.5, proposer: 'magic', allowNewGlobals: 'yes' },
                specs: { run: 'always' },
                clangd: { enabled: 'no', diagnostics: 'all', backgroundIndex: 'yes', path: ' ' },
                trace: { server: 'loud' },
            },
            context,
        );
        assert.deepEqual(settings.server.path, []);
        assert.equal(settings.arch, 'auto');
        assert.deepEqual(settings.includeDirs, ['inc']);
        assert.equal(settings.checkOn, 'save');
        assert.equal(settings.compiler, 'auto');
        assert.equal(settings.hostCheck, false);
        assert.equal(settings.compileCommands, null);
        assert.deepEqual(settings.exclude, []);
        assert.equal(settings.maxFileBytes, 2097152);
        assert.equal(settings.workerIdleSeconds, 60);
        assert.equal(settings.startupCheckFiles, 50);
        assert.equal(settings.checkTimeoutSeconds, 120);
        assert.equal(settings.compileMemoryMB, 8192);
        assert.equal(settings.compileTimeoutSeconds, null);
        assert.deepEqual(settings.gpu, { enabled: true, device: null, devices: null, achievedOccupancy: true });
        assert.deepEqual(settings.evaluation, { backend: 'auto' });
        assert.deepEqual(settings.cluster, { address: null });
        assert.deepEqual(settings.llm, { baseUrl: null, model: null });
        assert.deepEqual(settings.optimizer, DEFAULT_SETTINGS.optimizer);
        assert.deepEqual(settings.specs, { run: 'onAction' });
        assert.deepEqual(settings.clangd, DEFAULT_SETTINGS.clangd);
        assert.equal(settings.trace.server, 'off');
    });

    it('has exactly the settings package.json contributes, with the same defaults', () => {
        // A documented setting missing here never reaches the server (exclude and maxFileBytes did not).
        const leaves = (value: object, prefix: string): [string, unknown][] =>
            Object.entries(value).flatMap(([key, v]: [string, unknown]) =>
                typeof v === 'object' && v !== null && !Array.isArray(v)
                    ? leaves(v, `${prefix}${key}.`)
                    : [[`${prefix}${key}`, v] as [string, unknown]],
            );
        const contributed = Object.entries(manifest.contributes.configuration.properties).map(
            ([key, schema]) => [key, schema.default] as [string, unknown],
        );
        const ours = leaves(DEFAULT_SETTINGS, 'kernelLsp.');
        assert.deepEqual(new Map(ours), new Map(contributed));
    });

    it('takes a GPU count as a number or a string, as the server wants it: a string', () => {
        const devices = (value: unknown) => normalizeSettings({ gpu: { devices: value } }, context).gpu.devices;
        assert.equal(devices(2), '2');
        assert.equal(devices(' ALL '), 'all');
        assert.equal(devices('3'), '3');
        assert.equal(devices(1.5), null);
        assert.equal(devices('two'), null);
    });

    it('accepts arch as one string, and collapses a one-element list to it', () => {
        assert.equal(normalizeSettings({ arch: 'sm_89' }, context).arch, 'sm_89');
        assert.equal(normalizeSettings({ arch: ['sm_89'] }, context).arch, 'sm_89');
        assert.equal(normalizeSettings({ arch: [] }, context).arch, 'auto');
    });

    it('expands paths in the server command and interpreter', () => {
        const settings = normalizeSettings(
            { server: { path: ['${userHome}/bin/kernel-lsp'] }, interpreter: ['${workspaceFolder}/.venv/bin/python'] },
            context,
        );
        assert.deepEqual(settings.server.path, ['/home/me/bin/kernel-lsp']);
        assert.deepEqual(settings.interpreter, ['/ws/.venv/bin/python']);
    });
});

describe('expandPath', () => {
    it('leaves ${workspaceFolder} alone when there is no folder', () => {
        assert.equal(expandPath('${workspaceFolder}/inc', { userHome: '/h' }), '${workspaceFolder}/inc');
    });

    it('expands only a leading ~', () => {
        assert.equal(expandPath('~', context), '/home/me');
        assert.equal(expandPath('a/~/b', context), 'a/~/b');
    });
});

describe('toServerLaunchOptions', () => {
    const settings = normalizeSettings({ llm: { model: 'm' } }, context);

    it('passes the settings as initializationOptions, unchanged and without the key', () => {
        const launch = toServerLaunchOptions(settings, {}, 'sk-secret');
        assert.equal(launch.initializationOptions, settings);
        assert.ok(!JSON.stringify(launch.initializationOptions).includes('sk-secret'));
    });

    it('gives the stored key to the server only as OPENAI_API_KEY, over an inherited one', () => {
        const launch = toServerLaunchOptions(settings, { PATH: '/bin', OPENAI_API_KEY: 'from-env' }, 'sk-secret');
        assert.deepEqual(launch.env, { PATH: '/bin', OPENAI_API_KEY: 'sk-secret' });
    });

    it('inherits OPENAI_API_KEY from the environment when no key is stored', () => {
        assert.equal(toServerLaunchOptions(settings, { OPENAI_API_KEY: 'from-env' }, undefined).env.OPENAI_API_KEY, 'from-env');
        assert.equal(toServerLaunchOptions(settings, { OPENAI_API_KEY: 'from-env' }, '').env.OPENAI_API_KEY, 'from-env');
    });

    it('sets no key when there is none, and drops undefined variables', () => {
        const env = toServerLaunchOptions(settings, { PATH: '/bin', UNSET: undefined }, undefined).env;
        assert.deepEqual(env, { PATH: '/bin' });
    });

    it('does not modify the environment it is given', () => {
        const base = { PATH: '/bin' };
        toServerLaunchOptions(settings, base, 'sk');
        assert.deepEqual(base, { PATH: '/bin' });
    });
});
