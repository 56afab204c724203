// Which command starts the server. Pure: every input is injected, so it is unit-tested without
// VS Code or the Python extension.

import { SERVER_MODULE } from './constants';

export interface ServerCommandInputs {
    /** `kernelLsp.server.path`: the full command. */
    serverPath: readonly string[];
    /** `kernelLsp.interpreter`: a Python interpreter, possibly with leading arguments. */
    interpreter: readonly string[];
    /** The interpreter selected in the Python extension, if it is installed and has one. */
    pythonExtensionInterpreter: readonly string[] | undefined;
}

/** Where the command came from, in the words the log and error messages use. */
export type ServerCommandSource = 'kernelLsp.server.path' | 'kernelLsp.interpreter' | 'Python extension' | 'PATH';

export interface ServerCommand {
    command: string;
    args: string[];
    source: ServerCommandSource;
    /**
     * The interpreter the server runs in, so the extension can check that `kernel_lsp` imports
     * before starting it. Undefined for `kernelLsp.server.path`: that command is opaque.
     */
    python: string[] | undefined;
}

/** Last resort when nothing is configured: what a Linux or macOS shell would run. */
export const FALLBACK_PYTHON = 'python3';

function nonEmpty(command: readonly string[] | undefined): string[] | undefined {
    const parts = (command ?? []).filter((part) => part.trim() !== '');
    return parts.length > 0 ? parts : undefined;
}

function runModule(python: string[], source: ServerCommandSource): ServerCommand {
    return { command: python[0], args: [...python.slice(1), '-m', SERVER_MODULE], source, python };
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
    if (selected) {
        return runModule(selected, 'Python extension');
    }
    return runModule([FALLBACK_PYTHON], 'PATH');
}

/** The shell-like one-liner for logs and messages (quotes parts with spaces). */
export function formatCommand(parts: readonly string[]): string {
    return parts.map((part) => (/[\s"']/.test(part) ? JSON.stringify(part) : part)).join(' ');
}

/** The message shown when `python -c "import kernel_lsp"` fails in the chosen interpreter. */
export function notInstalledMessage(command: ServerCommand): string {
    const python = formatCommand(command.python ?? [FALLBACK_PYTHON]);
    return (
        `kernel-lsp is not installed in the Python interpreter ${python} (from ${command.source}). ` +
        // No package registry serves kernel-lsp: it installs from a checkout of its repository.
        `Install it there from a checkout of the kernel-lsp repository: \`${python} -m pip install -e <checkout>\`, ` +
        'or choose another interpreter (kernelLsp.interpreter).'
    );
}
