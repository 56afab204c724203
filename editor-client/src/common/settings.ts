// Settings → what the server gets. Pure (no `vscode` import) so it is unit-tested under plain node.

import { API_KEY_ENV } from './constants';

export type CheckOn = 'save' | 'change';
export type Proposer = 'auto' | 'llm' | 'tune';
export type TraceLevel = 'off' | 'messages' | 'verbose';
export type Compiler = 'auto' | 'nvrtc' | 'nvcc';
export type EvaluationBackend = 'auto' | 'local' | 'ray';
/**
 * When the server may run a kernel's spec (`X.spec.py`, Python code from the workspace): `onAction`,
 * when the user acts on that file (opens or saves it in the editor, runs Optimize); `never`, read
 * only. The server never runs one at start-up or for files the user has not opened. The same two
 * values as the server's `specs.run` (kernel_lsp/config.py).
 */
export const SPECS_RUN_VALUES = ['onAction', 'never'] as const;
export type SpecsRun = (typeof SPECS_RUN_VALUES)[number];
export type ClangdDiagnostics = 'off' | 'agreeing';

/**
 * The `kernelLsp` settings section, nested the way `workspace.getConfiguration().get('kernelLsp')`
 * returns it. The server receives exactly this shape twice: as initializationOptions, and as the
 * answer to `workspace/configuration` for section `kernelLsp`, so both must come from
 * {@link normalizeSettings}.
 */
export interface KernelLspSettings {
    server: { path: string[] };
    interpreter: string[];
    /** "auto", one arch ("sm_90"), or several (["sm_90", "sm_80"]). */
    arch: string | string[];
    includeDirs: string[];
    defines: string[];
    defaultDevice: boolean;
    compiler: Compiler;
    hostCheck: boolean;
    /** compile_commands.json (or its folder); null: found upward from each file. */
    compileCommands: string | null;
    /** Globs of folders/files the workspace watcher skips, relative to the workspace folder. */
    exclude: string[];
    /** Larger files are not compiled. */
    maxFileBytes: number;
    /** Compile workers end after this long without a check; 0 keeps them. */
    workerIdleSeconds: number;
    /** A workspace folder of at most this many files is checked at start-up (background); 0: none. */
    startupCheckFiles: number;
    /** One file's check past this is stopped: "not checked in time". */
    checkTimeoutSeconds: number;
    /** Address-space limit (MiB) of each compile worker and its compilers; 0: none. */
    compileMemoryMB: number;
    /** A larger compile_commands.json is not read. */
    compileCommandsMaxBytes: number;
    /** nvcc's time limit per compile in seconds; null: the server's default (60). */
    compileTimeoutSeconds: number | null;
    checkOn: CheckOn;
    /** devices: "all" or a count of GPUs from `device` on (spec'd files verified in parallel); null: one. */
    gpu: { enabled: boolean; device: number | null; devices: string | null; achievedOccupancy: boolean };
    /** Where GPU work runs: this machine's GPUs, a Ray cluster, or Ray only when an address is given. */
    evaluation: { backend: EvaluationBackend };
    /** The Ray cluster to join; null: RAY_ADDRESS, else a local one. */
    cluster: { address: string | null };
    llm: { baseUrl: string | null; model: string | null };
    optimizer: { rounds: number; candidates: number; proposer: Proposer; allowNewGlobals: boolean };
    specs: { run: SpecsRun };
    /** clangd behind the server; `path` is honoured from user settings only (scope "machine"). */
    clangd: { enabled: boolean; diagnostics: ClangdDiagnostics; backgroundIndex: boolean; path: string | null };
    trace: { server: TraceLevel };
}

export const DEFAULT_SETTINGS: KernelLspSettings = {
    server: { path: [] },
    interpreter: [],
    arch: 'auto',
    includeDirs: [],
    defines: [],
    defaultDevice: false,
    compiler: 'auto',
    hostCheck: false,
    compileCommands: null,
    exclude: [],
    maxFileBytes: 2 * 1024 * 1024,
    workerIdleSeconds: 60,
    startupCheckFiles: 50,
    checkTimeoutSeconds: 120,
    compileMemoryMB: 8192,
    compileCommandsMaxBytes: 256 * 1024 * 1024,
    compileTimeoutSeconds: null,
    checkOn: 'save',
    gpu: { enabled: true, device: null, devices: null, achievedOccupancy: true },
    evaluation: { backend: 'auto' },
    cluster: { address: null },
    llm: { baseUrl: null, model: null },
    optimizer: { rounds: 3, candidates: 4, proposer: 'auto', allowNewGlobals: false },
    specs: { run: 'onAction' },
    clangd: { enabled: true, diagnostics: 'off', backgroundIndex: false, path: null },
    trace: { server: 'off' },
};

/** What `${workspaceFolder}`, `${userHome}` and a leading `~` expand to. */
export interface PathContext {
    workspaceFolder?: string;
    userHome: string;
}

type Json = Record<string, unknown>;

function asObject(value: unknown): Json {
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Json) : {};
}

function asStringArray(value: unknown): string[] {
    if (!Array.isArray(value)) {
        return [];
    }
    // A blank entry is what a half-edited settings.json leaves behind; it never means anything.
    return value.filter((item): item is string => typeof item === 'string' && item.trim() !== '');
}

function asNullableString(value: unknown): string | null {
    return typeof value === 'string' && value.trim() !== '' ? value.trim() : null;
}

function asPositiveInteger(value: unknown, fallback: number): number {
    return typeof value === 'number' && Number.isInteger(value) && value >= 1 ? value : fallback;
}

function asNonNegativeInteger(value: unknown, fallback: number): number {
    return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : fallback;
}

function asPositiveNumberOrNull(value: unknown): number | null {
    return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : null;
}

function asChoice<T extends string>(value: unknown, choices: readonly T[], fallback: T): T {
    return choices.includes(value as T) ? (value as T) : fallback;
}

/** "all", or a positive whole number of GPUs (as the server wants it: a string); else null. */
function asDevices(value: unknown): string | null {
    const text = typeof value === 'number' ? String(value) : typeof value === 'string' ? value.trim().toLowerCase() : '';
    return text === 'all' || (/^[0-9]+$/.test(text) && Number(text) > 0) ? text : null;
}

function asArch(value: unknown): string | string[] {
    if (typeof value === 'string' && value.trim() !== '') {
        return value.trim();
    }
    const archs = asStringArray(value).map((arch) => arch.trim());
    if (archs.length === 0) {
        return DEFAULT_SETTINGS.arch;
    }
    // One arch in a list means the same as the plain string; keep the simpler form.
    return archs.length === 1 ? archs[0] : archs;
}

/** Expands `${workspaceFolder}`, `${userHome}` and a leading `~` the way users expect from VS Code. */
export function expandPath(value: string, context: PathContext): string {
    let expanded = value.replace(/\$\{userHome\}/g, context.userHome);
    if (context.workspaceFolder !== undefined) {
        expanded = expanded.replace(/\$\{workspaceFolder\}/g, context.workspaceFolder);
    }
    if (expanded === '~' || expanded.startsWith('~/')) {
        expanded = context.userHome + expanded.slice(1);
    }
    return expanded;
}

/**
 * Turns the raw `kernelLsp` section (anything a user can write into settings.json) into complete,
 * well-typed settings: wrong types fall back to the defaults, paths are expanded.
 */
export function normalizeSettings(raw: unknown, context: PathContext): KernelLspSettings {
    const section = asObject(raw);
    const server = asObject(section.server);
    const gpu = asObject(section.gpu);
    const llm = asObject(section.llm);
    const optimizer = asObject(section.optimizer);
    const trace = asObject(section.trace);
    const specs = asObject(section.specs);
    const evaluation = asObject(section.evaluation);
    const cluster = asObject(section.cluster);
    const clangd = asObject(section.clangd);
    const clangdPath = asNullableString(clangd.path);
    const expand = (items: string[]) => items.map((item) => expandPath(item, context));
    const device = gpu.device;
    const compileCommands = asNullableString(section.compileCommands);

    return {
        server: { path: expand(asStringArray(server.path)) },
        interpreter: expand(asStringArray(section.interpreter)),
        arch: asArch(section.arch),
        includeDirs: expand(asStringArray(section.includeDirs)),
        defines: asStringArray(section.defines),
        defaultDevice: section.defaultDevice === true,
        compiler: asChoice(section.compiler, ['auto', 'nvrtc', 'nvcc'], DEFAULT_SETTINGS.compiler),
        hostCheck: section.hostCheck === true,
        compileCommands: compileCommands === null ? null : expandPath(compileCommands, context),
        // Globs relative to the workspace: the server joins them to each folder, so no expansion.
        exclude: asStringArray(section.exclude),
        maxFileBytes: asPositiveInteger(section.maxFileBytes, DEFAULT_SETTINGS.maxFileBytes),
        workerIdleSeconds: asNonNegativeInteger(section.workerIdleSeconds, DEFAULT_SETTINGS.workerIdleSeconds),
        startupCheckFiles: asNonNegativeInteger(section.startupCheckFiles, DEFAULT_SETTINGS.startupCheckFiles),
        checkTimeoutSeconds: asPositiveInteger(section.checkTimeoutSeconds, DEFAULT_SETTINGS.checkTimeoutSeconds),
        compileMemoryMB: asNonNegativeInteger(section.compileMemoryMB, DEFAULT_SETTINGS.compileMemoryMB),
        compileCommandsMaxBytes: asNonNegativeInteger(
            section.compileCommandsMaxBytes,
            DEFAULT_SETTINGS.compileCommandsMaxBytes,
        ),
        compileTimeoutSeconds: asPositiveNumberOrNull(section.compileTimeoutSeconds),
        checkOn: asChoice(section.checkOn, ['save', 'change'], DEFAULT_SETTINGS.checkOn),
        gpu: {
            enabled: gpu.enabled !== false,
            device: typeof device === 'number' && Number.isInteger(device) && device >= 0 ? device : null,
            devices: asDevices(gpu.devices),
            achievedOccupancy: gpu.achievedOccupancy !== false,
        },
        evaluation: {
            backend: asChoice(evaluation.backend, ['auto', 'local', 'ray'], DEFAULT_SETTINGS.evaluation.backend),
        },
        cluster: { address: asNullableString(cluster.address) },
        llm: { baseUrl: asNullableString(llm.baseUrl), model: asNullableString(llm.model) },
        optimizer: {
            rounds: asPositiveInteger(optimizer.rounds, DEFAULT_SETTINGS.optimizer.rounds),
            candidates: asPositiveInteger(optimizer.candidates, DEFAULT_SETTINGS.optimizer.candidates),
            proposer: asChoice(optimizer.proposer, ['auto', 'llm', 'tune'], DEFAULT_SETTINGS.optimizer.proposer),
            allowNewGlobals: optimizer.allowNewGlobals === true,
        },
        specs: { run: asChoice(specs.run, SPECS_RUN_VALUES, DEFAULT_SETTINGS.specs.run) },
        clangd: {
            enabled: clangd.enabled !== false,
            diagnostics: asChoice(clangd.diagnostics, ['off', 'agreeing'], DEFAULT_SETTINGS.clangd.diagnostics),
            backgroundIndex: clangd.backgroundIndex === true,
            path: clangdPath === null ? null : expandPath(clangdPath, context),
        },
        trace: { server: asChoice(trace.server, ['off', 'messages', 'verbose'], DEFAULT_SETTINGS.trace.server) },
    };
}

export interface ServerLaunchOptions {
    initializationOptions: KernelLspSettings;
    /** The server process's whole environment. Holds the API key: never log it. */
    env: Record<string, string>;
}

/**
 * Settings → what the server process is started with.
 *
 * The API key travels only in the environment, never in initializationOptions (which the LSP trace
 * logs). A key stored in SecretStorage wins over an inherited OPENAI_API_KEY because the user set
 * it for this editor on purpose; without one the inherited variable passes through untouched.
 */
export function toServerLaunchOptions(
    settings: KernelLspSettings,
    baseEnv: Readonly<Record<string, string | undefined>>,
    storedApiKey: string | undefined,
): ServerLaunchOptions {
    const env: Record<string, string> = {};
    for (const [name, value] of Object.entries(baseEnv)) {
        if (value !== undefined) {
            env[name] = value;
        }
    }
    if (storedApiKey !== undefined && storedApiKey !== '') {
        env[API_KEY_ENV] = storedApiKey;
    }
    return { initializationOptions: settings, env };
}
