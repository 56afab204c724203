// What a workspace may decide about the server: which settings it cannot set, what Restricted
// Mode turns off, and where the server process runs. Pure (no `vscode` import): unit-tested
// under plain node.

import { isAbsolute, relative, resolve } from 'node:path';
import { KernelLspSettings } from './settings';

/**
 * Settings (relative to `kernelLsp.`) that are read from the user's settings only, never from a
 * workspace's `.vscode/settings.json`, trusted or not. Each names a program the extension or the
 * server starts, or an endpoint that receives the LLM API key or the user's kernels:
 *
 * - A trusted workspace may run its own code (tasks, specs), but trusting a repository is not
 *   consenting to it replacing the server, the interpreter or clangd with a binary it ships.
 * - The API key belongs to the user, not to the workspace: a workspace that sets `llm.baseUrl`
 *   receives it as a Bearer token, and a Ray cluster address it sets receives the kernels and
 *   sends back pickled objects the server loads.
 *
 * Workspace Trust alone (`restrictedConfigurations` in package.json) stops these only until the
 * workspace is trusted; this list stops them for good. package.json declares them
 * `machine`-scoped too, so the Settings editor does not offer them per workspace.
 */
export const USER_SCOPE_ONLY = ['server.path', 'interpreter', 'clangd.path', 'llm.baseUrl', 'cluster.address'] as const;

/** What `WorkspaceConfiguration.inspect()` reports of one setting (only the fields used here). */
export interface ScopedValues {
    globalValue?: unknown;
    workspaceValue?: unknown;
    workspaceFolderValue?: unknown;
    workspaceLanguageValue?: unknown;
    workspaceFolderLanguageValue?: unknown;
}

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
    return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Sets (or, for `undefined`, removes) `dotted` inside the nested `section`. */
function setDotted(section: Json, dotted: string, value: unknown): void {
    const parts = dotted.split('.');
    let node = section;
    for (const part of parts.slice(0, -1)) {
        const child = node[part];
        if (!isObject(child)) {
            if (value === undefined) {
                return;
            }
            node[part] = {};
        }
        node = node[part] as Json;
    }
    const leaf = parts[parts.length - 1];
    if (value === undefined) {
        Reflect.deleteProperty(node, leaf);
    } else {
        node[leaf] = value;
    }
}

export interface UserScopedSection {
    /** The `kernelLsp` section with every {@link USER_SCOPE_ONLY} setting taken from user settings. */
    section: Json;
    /** Full names of the settings whose workspace or folder value was present and ignored. */
    ignored: string[];
}

/**
 * Replaces the merged value of each {@link USER_SCOPE_ONLY} setting in `raw` (the `kernelLsp`
 * section as `getConfiguration().get()` returns it, workspace values included) by its user-settings
 * value, or removes it (its default then applies). `inspect` takes a name relative to `kernelLsp.`.
 */
export function withUserScopeOnly(raw: unknown, inspect: (key: string) => ScopedValues | undefined): UserScopedSection {
    // A JSON copy: VS Code hands configuration objects out as read-only proxies, which
    // structuredClone refuses (DataCloneError); settings are JSON anyway.
    const section = (isObject(raw) ? JSON.parse(JSON.stringify(raw)) : {}) as Json;
    const ignored: string[] = [];
    for (const key of USER_SCOPE_ONLY) {
        const values = inspect(key);
        setDotted(section, key, values?.globalValue);
        const fromWorkspace = [
            values?.workspaceValue,
            values?.workspaceFolderValue,
            values?.workspaceLanguageValue,
            values?.workspaceFolderLanguageValue,
        ];
        if (fromWorkspace.some((value) => value !== undefined)) {
            ignored.push(`kernelLsp.${key}`);
        }
    }
    return { section, ignored };
}

/** The message for workspace values of user-only settings (shown once per setting and session). */
export function ignoredWorkspaceSettingMessage(names: readonly string[]): string {
    const list = names.join(', ');
    return (
        `kernel-lsp ignores ${list} in this workspace's settings: ${names.length === 1 ? 'it names' : 'they name'} ` +
        'a program to run or an endpoint that receives your API key, so only your user settings may set ' +
        `${names.length === 1 ? 'it' : 'them'}. Move ${names.length === 1 ? 'it' : 'them'} to your user settings if you meant it.`
    );
}

/**
 * What the server gets in an untrusted (Restricted Mode) workspace: no spec runs, whatever the
 * settings say. Diagnostics are static (compiling is not running), so everything else stays.
 */
export function applyWorkspaceTrust(settings: KernelLspSettings, trusted: boolean): KernelLspSettings {
    return trusted ? settings : { ...settings, specs: { ...settings.specs, run: 'never' } };
}

/** Is `path` one of `folders` or inside one? (Both absolute; compared after resolving `..`.) */
export function isInsideAny(path: string, folders: readonly string[]): boolean {
    const target = resolve(path);
    return folders.some((folder) => {
        const rel = relative(resolve(folder), target);
        return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
    });
}

/**
 * The server's working directory: the first candidate outside every workspace folder. Python puts
 * the working directory first on `sys.path` for `-m` (unless `-I`), and the server resolves a
 * relative path it is given against it: neither may be the workspace's choice. Candidates are the
 * extension's global storage, then the temp folder; the filesystem root is the last resort.
 */
export function chooseWorkingDirectory(candidates: readonly string[], workspaceFolders: readonly string[]): string {
    const outside = candidates.find((candidate) => candidate !== '' && !isInsideAny(candidate, workspaceFolders));
    return outside ?? resolve('/');
}
