// The interpreter selected in the Python extension (ms-python.python), through its published API.
// The Python extension is optional: without it every function here answers "nothing".

import { PythonExtension } from '@vscode/python-extension';
import { Disposable, Uri, extensions } from 'vscode';

const PYTHON_EXTENSION_ID = 'ms-python.python';

async function pythonApi(): Promise<PythonExtension | undefined> {
    if (!extensions.getExtension(PYTHON_EXTENSION_ID)) {
        return undefined;
    }
    try {
        return await PythonExtension.api();
    } catch {
        return undefined; // Installed but disabled, or failed to activate.
    }
}

export function isPythonExtensionInstalled(): boolean {
    return extensions.getExtension(PYTHON_EXTENSION_ID) !== undefined;
}

/** The selected interpreter's executable for `resource`, or undefined. */
export async function selectedInterpreter(resource?: Uri): Promise<string[] | undefined> {
    const api = await pythonApi();
    if (!api) {
        return undefined;
    }
    const environment = await api.environments.resolveEnvironment(
        api.environments.getActiveEnvironmentPath(resource),
    );
    const executable = environment?.executable.uri?.fsPath;
    return executable ? [executable] : undefined;
}

/** Calls `listener` when the user selects another interpreter in the Python extension. */
export async function onDidChangeSelectedInterpreter(listener: () => void): Promise<Disposable> {
    const api = await pythonApi();
    if (!api) {
        return new Disposable(() => undefined);
    }
    return api.environments.onDidChangeActiveEnvironmentPath(() => {
        listener();
    });
}
