// Which command starts the server. Pure: every input is injected, so it is unit-tested without
// VS Code or the Python extension.

import { SERVER_MODULE } from './constants';
import { isInsideAny } from './trust';

export interface ServerCommandInputs {
    /** `kernelLsp.server.path`: the full command. */
    serverPath: readonly string[];
    /** `kernelLsp.interpreter`: a Python interpreter, possibly with leading arguments. */
    interpreter: readonly string[];
    /** The interpreter selected in the Python extension, if it is installed and has one. */
    pythonExtensionInterpreter: readonly string[] | undefined;
    /**
     * Workspace folders of an untrusted (Restricted Mode) window, empty when trusted: an
     * interpreter inside one of them is the workspace's binary, and is not run.
     */
    untrustedFolders?: readonly string[];
}

/** Where the command came from, in the words the log and error messages use. */
export type ServerCommandSource =
    | 'kernelLsp.server.path'
    | 'kernelLsp.interpreter'
    | 'Python extension'
    | 'PATH'
    | 'bundled environment';

export interface ServerCommand {
    command: string;
    args: string[];
    source: ServerCommandSource;
    /**
     * The interpreter the server runs in, so the extension can check that `kernel_lsp` imports
     * before starting it. Undefined for `kernelLsp.server.path`: that command is opaque.
     */
    python: string[] | undefined;
    /** Why a candidate was passed over (for the log), e.g. an interpreter inside an untrusted workspace. */
    note?: string;
}

/** Last resort when nothing is configured: what a Linux or macOS shell would run. */
export const FALLBACK_PYTHON = 'python3';

function nonEmpty(command: readonly string[] | undefined): string[] | undefined {
    const parts = (command ?? []).filter((part) => part.trim() !== '');
    return parts.length > 0 ? parts : undefined;
}

/**
 * `-I`, isolated mode: Python puts neither the working directory nor the script's folder on
 * `sys.path` and ignores PYTHON* variables, so a `kernel_lsp/` or `optimizer.py` in the workspace
 * cannot shadow the installed server. (`-P` does only the first and needs Python 3.11; the server
 * supports 3.10.) It also skips user site-packages: install the server into an environment.
 */
export const ISOLATED = '-I';

/** `<python...> -I <args>`: a Python command line that ignores the working directory. */
export function isolatedPython(python: readonly string[], args: readonly string[]): { command: string; args: string[] } {
    return { command: python[0], args: [...python.slice(1), ISOLATED, ...args] };
}

export function runModule(python: string[], source: ServerCommandSource, note?: string): ServerCommand {
    return { ...isolatedPython(python, ['-m', SERVER_MODULE]), source, python, ...(note ? { note } : {}) };
}

/**
 * Resolution order: `kernelLsp.server.path`, else `kernelLsp.interpreter`, else the Python
 * extension's interpreter, else `python3` on PATH.
 */
export function resolveServerCommand(inputs: ServerCommandInputs): ServerCommand {
    const serverPath = nonEmpty(inputs.serverPath);
    if (serverPath) {
        return { command: serverPath[0], args: serverPath.slice(1), source: 'kernelLsp.server.path', python: undefined };
    }
    const interpreter = nonEmpty(inputs.interpreter);
    if (interpreter) {
        return runModule(interpreter, 'kernelLsp.interpreter');
    }
    const selected = nonEmpty(inputs.pythonExtensionInterpreter);
    if (selected && isInsideAny(selected[0], inputs.untrustedFolders ?? [])) {
        const note = `the Python extension's interpreter ${selected[0]} is inside this untrusted workspace: not run`;
        return runModule([FALLBACK_PYTHON], 'PATH', note);
    }
    if (selected) {
        return runModule(selected, 'Python extension');
    }
    return runModule([FALLBACK_PYTHON], 'PATH');
}

/** How the server process is spawned: the command as resolved, its environment and working directory. */
export interface ServerSpawn {
    command: string;
    args: string[];
    options: { env: Record<string, string>; cwd: string };
}

export function serverSpawn(command: ServerCommand, env: Record<string, string>, cwd: string): ServerSpawn {
    return { command: command.command, args: [...command.args], options: { env, cwd } };
}

/** The shell-like one-liner for logs and messages (quotes parts with spaces). */
export function formatCommand(parts: readonly string[]): string {
    return parts.map((part) => (/[\s"']/.test(part) ? JSON.stringify(part) : part)).join(' ');
}

/** The message shown when `python -I -c "import kernel_lsp"` fails in the chosen interpreter. */
export function notInstalledMessage(command: ServerCommand): string {
    const python = formatCommand(command.python ?? [FALLBACK_PYTHON]);
    const choose =
        command.source === 'kernelLsp.interpreter'
            ? 'or clear kernelLsp.interpreter to let the extension set up its own environment.'
            : 'or choose another interpreter (kernelLsp.interpreter).';
    return (
        `kernel-lsp is not installed in the Python interpreter ${python} (from ${command.source}). ` +
        // No package registry serves kernel-lsp: it installs from a checkout or the built wheel.
        `Install it there from a checkout of the kernel-lsp repository: \`${python} -m pip install -e <checkout>\`, ${choose}`
    );
}
