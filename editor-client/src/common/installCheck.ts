// Does the interpreter have the server? Checked before starting it, because a Python traceback in
// the log is a much worse first experience than a message that says what to install where.
// No `vscode` import: unit-tested under plain node.

import { execFile } from 'node:child_process';
import { isolatedPython } from './interpreter';

export type ImportCheck =
    | { kind: 'ok' }
    /** The interpreter itself could not be run (not found, not executable). */
    | { kind: 'noInterpreter'; error: string }
    /** The interpreter ran but the import failed; `error` is the end of its stderr. */
    | { kind: 'notImportable'; error: string };

const CHECK_TIMEOUT_MS = 30_000;

/**
 * Runs `<python...> -I -c "import <module>"` in `cwd`, the way the server will be started: the
 * import must find the installed module, and must not run a same-named folder of the workspace.
 */
export function checkModuleImports(
    python: readonly string[],
    module: string,
    options: { env: Readonly<Record<string, string>>; cwd: string },
): Promise<ImportCheck> {
    const { command, args } = isolatedPython(python, ['-c', `import ${module}`]);
    return new Promise((resolve) => {
        execFile(
            command,
            args,
            { env: options.env, cwd: options.cwd, timeout: CHECK_TIMEOUT_MS, windowsHide: true },
            (error, _stdout, stderr) => {
                if (!error) {
                    resolve({ kind: 'ok' });
                } else if (typeof error.code === 'string') {
                    // A string code (ENOENT, EACCES) is a spawn failure; a number is an exit status.
                    resolve({ kind: 'noInterpreter', error: `${error.code}: ${error.message}` });
                } else {
                    const lastLines = stderr.trim().split('\n').slice(-3).join('\n');
                    resolve({ kind: 'notImportable', error: lastLines || error.message });
                }
            },
        );
    });
}
