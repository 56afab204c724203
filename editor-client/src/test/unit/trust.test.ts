import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveServerCommand, serverSpawn } from '../../common/interpreter';
import { DEFAULT_SETTINGS } from '../../common/settings';
import {
    USER_SCOPE_ONLY,
    applyWorkspaceTrust,
    chooseWorkingDirectory,
    ignoredWorkspaceSettingMessage,
    isInsideAny,
    withUserScopeOnly,
} from '../../common/trust';

interface Manifest {
    capabilities?: {
        untrustedWorkspaces?: { supported?: unknown; description?: unknown; restrictedConfigurations?: unknown };
    };
    contributes: { configuration: { properties: Record<string, { scope?: string; enum?: string[]; default?: unknown }> } };
}
const manifest = JSON.parse(readFileSync(join(__dirname, '..', '..', '..', 'package.json'), 'utf8')) as Manifest;
const contributed = Object.keys(manifest.contributes.configuration.properties);

/**
 * The rule for settings a workspace must not set while untrusted, by name so that a new one cannot
 * be forgotten: whatever names a program or its arguments or environment (`…path`, `…interpreter`,
 * `…executable`, `…command`, `…args`, `…env`), an endpoint (`…url`, `…baseUrl`, `…address`,
 * `…host`, `…endpoint`), and every `specs.*` setting (they decide whether workspace code runs).
 */
const PROGRAM_OR_ENDPOINT = /\.(?:[a-z]+\.)*(?:[a-z]*path|interpreter|executable|command|args|arguments|env|environment|[a-z]*url|address|host|endpoint)$/i;
const RUNS_WORKSPACE_CODE = /^kernelLsp\.specs\./;
const mustBeRestricted = (name: string) => PROGRAM_OR_ENDPOINT.test(name) || RUNS_WORKSPACE_CODE.test(name);

describe('the Workspace Trust declaration in package.json', () => {
    const trust = manifest.capabilities?.untrustedWorkspaces;
    const restricted = (trust?.restrictedConfigurations ?? []) as string[];

    it('runs in Restricted Mode with limited features, and says what is limited', () => {
        assert.equal(trust?.supported, 'limited');
        assert.equal(typeof trust.description, 'string');
        assert.match(trust.description as string, /spec/);
    });

    it('restricts every contributed setting that names a program, a path to run, an endpoint or runs specs', () => {
        const required = contributed.filter(mustBeRestricted);
        // The rule finds what it should (so it is not vacuous)...
        for (const name of ['kernelLsp.server.path', 'kernelLsp.interpreter', 'kernelLsp.llm.baseUrl', 'kernelLsp.cluster.address', 'kernelLsp.specs.run']) {
            assert.ok(required.includes(name), `the rule misses ${name}`);
        }
        // ...and not what it should not.
        for (const name of ['kernelLsp.includeDirs', 'kernelLsp.defines', 'kernelLsp.compileCommands', 'kernelLsp.llm.model']) {
            assert.ok(!mustBeRestricted(name), `the rule wrongly takes ${name}`);
        }
        assert.deepEqual(required.filter((name) => !restricted.includes(name)), []);
    });

    it('lists only such settings, each once (kernelLsp.clangd.path ahead of its contribution)', () => {
        assert.deepEqual(restricted.filter((name) => !mustBeRestricted(name)), []);
        assert.equal(new Set(restricted).size, restricted.length);
        assert.ok(restricted.includes('kernelLsp.clangd.path'));
    });

    it('reads every program and endpoint setting from user settings only, and declares them machine-scoped', () => {
        const userOnly = USER_SCOPE_ONLY.map((key) => `kernelLsp.${key}`);
        const programsAndEndpoints = restricted.filter((name) => !RUNS_WORKSPACE_CODE.test(name));
        assert.deepEqual([...userOnly].sort(), [...programsAndEndpoints].sort());
        for (const name of userOnly.filter((key) => contributed.includes(key))) {
            assert.equal(manifest.contributes.configuration.properties[name].scope, 'machine', name);
        }
    });

    it('offers specs.run with the values the server accepts, defaulting to running specs on the user\'s action', () => {
        const specsRun = manifest.contributes.configuration.properties['kernelLsp.specs.run'];
        assert.deepEqual(specsRun.enum, ['onAction', 'never']);
        assert.equal(specsRun.default, 'onAction');
    });
});

describe('withUserScopeOnly', () => {
    const raw = {
        server: { path: ['/repo/evil-server'] },
        interpreter: ['/home/me/venv/bin/python'],
        llm: { baseUrl: 'https://attacker.example/v1', model: 'm' },
        arch: 'sm_90',
    };
    const inspect = (key: string) =>
        ({
            'server.path': { workspaceValue: ['/repo/evil-server'] },
            interpreter: { globalValue: ['/home/me/venv/bin/python'] },
            'llm.baseUrl': { globalValue: 'https://api.example/v1', workspaceFolderValue: 'https://attacker.example/v1' },
        })[key];

    it('takes each program and endpoint setting from user settings, whatever the workspace says', () => {
        const { section, ignored } = withUserScopeOnly(raw, inspect);
        assert.deepEqual(section, {
            server: {},
            interpreter: ['/home/me/venv/bin/python'],
            llm: { baseUrl: 'https://api.example/v1', model: 'm' },
            arch: 'sm_90',
        });
        assert.deepEqual(ignored, ['kernelLsp.server.path', 'kernelLsp.llm.baseUrl']);
        assert.equal(raw.server.path[0], '/repo/evil-server', 'the input is not modified');
    });

    it('copies the read-only proxies VS Code hands out (structuredClone throws on them)', () => {
        const readOnly = <T extends object>(value: T): T =>
            new Proxy(value, {
                get: (target, key) => {
                    const child: unknown = Reflect.get(target, key);
                    return typeof child === 'object' && child !== null ? readOnly(child) : child;
                },
                set: () => {
                    throw new Error('read-only');
                },
            });
        assert.throws(() => structuredClone(readOnly(raw)), /could not be cloned/);
        const { section } = withUserScopeOnly(readOnly(raw), inspect);
        assert.deepEqual(section.llm, { baseUrl: 'https://api.example/v1', model: 'm' });
    });

    it('sets a user value the merged section lacks, and leaves an empty section empty', () => {
        assert.deepEqual(withUserScopeOnly(undefined, () => ({ globalValue: 'ray://head:10001' })).section.cluster, {
            address: 'ray://head:10001',
        });
        assert.deepEqual(withUserScopeOnly({}, () => undefined), { section: {}, ignored: [] });
    });

    it('says which settings it ignored and why, in one message', () => {
        const message = ignoredWorkspaceSettingMessage(['kernelLsp.llm.baseUrl']);
        assert.match(message, /kernelLsp\.llm\.baseUrl/);
        assert.match(message, /user settings/);
        assert.match(message, /API key/);
    });
});

describe('applyWorkspaceTrust', () => {
    const settings = { ...DEFAULT_SETTINGS, specs: { run: 'onAction' as const } };

    it('runs no spec in an untrusted workspace, whatever the settings say', () => {
        assert.equal(applyWorkspaceTrust(settings, false).specs.run, 'never');
        assert.equal(applyWorkspaceTrust(settings, false).arch, settings.arch);
    });

    it('keeps the settings in a trusted one', () => {
        assert.equal(applyWorkspaceTrust(settings, true), settings);
    });
});

describe('the server launch', () => {
    const workspace = '/home/me/repo';
    const storage = '/home/me/.config/Code/User/globalStorage/kernel-lsp.kernel-lsp';

    it('runs every interpreter isolated (-I), so the workspace cannot shadow kernel_lsp or optimizer', () => {
        const sources = [
            { serverPath: [], interpreter: ['/usr/bin/python3', '-X', 'utf8'], pythonExtensionInterpreter: undefined },
            { serverPath: [], interpreter: [], pythonExtensionInterpreter: ['/venv/bin/python'] },
            { serverPath: [], interpreter: [], pythonExtensionInterpreter: undefined },
        ];
        for (const inputs of sources) {
            const command = resolveServerCommand(inputs);
            const args = command.args;
            assert.deepEqual(args.slice(-3), ['-I', '-m', 'kernel_lsp'], command.source);
        }
    });

    it('starts in a working directory outside the workspace', () => {
        const command = resolveServerCommand({ serverPath: [], interpreter: [], pythonExtensionInterpreter: undefined });
        const spawn = serverSpawn(command, {}, chooseWorkingDirectory([storage, tmpdir()], [workspace]));
        assert.equal(spawn.options.cwd, storage);
        assert.ok(!isInsideAny(spawn.options.cwd, [workspace]));
    });

    it('passes over a candidate inside the workspace (a workspace opened at the home folder)', () => {
        assert.equal(chooseWorkingDirectory([storage, '/tmp'], ['/home/me']), '/tmp');
        assert.equal(chooseWorkingDirectory([storage, '/tmp'], ['/home/me', '/tmp']), '/');
    });

    it('tells inside from outside by path, not by prefix', () => {
        assert.ok(isInsideAny('/home/me/repo', [workspace]));
        assert.ok(isInsideAny('/home/me/repo/.venv/bin/python', [workspace]));
        assert.ok(!isInsideAny('/home/me/repo2/python', [workspace]));
        assert.ok(!isInsideAny('/home/me', [workspace]));
        assert.ok(isInsideAny('/home/me/repo/../repo/x', [workspace]));
    });

    it("does not run the Python extension's interpreter from inside an untrusted workspace", () => {
        const inputs = { serverPath: [], interpreter: [], pythonExtensionInterpreter: [`${workspace}/.venv/bin/python`] };
        const untrusted = resolveServerCommand({ ...inputs, untrustedFolders: [workspace] });
        assert.equal(untrusted.command, 'python3');
        assert.equal(untrusted.source, 'PATH');
        assert.match(untrusted.note ?? '', /untrusted/);
        const trusted = resolveServerCommand({ ...inputs, untrustedFolders: [] });
        assert.equal(trusted.command, `${workspace}/.venv/bin/python`);
    });
});
