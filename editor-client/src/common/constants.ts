// Names shared by package.json, the server contract and the code. No `vscode` import: the unit
// tests load this module under plain node.

/** Settings section, and the LanguageClient id: the client reads `kernelLsp.trace.server` itself. */
export const SETTINGS_SECTION = 'kernelLsp';
export const SERVER_NAME = 'kernel-lsp';
/** The Python module the interpreter runs with `-m`, and imports to check the install. */
export const SERVER_MODULE = 'kernel_lsp';

/** Commands the extension contributes (see package.json `contributes.commands`). */
export const Commands = {
    restart: 'kernel-lsp.restart',
    optimizeAtCursor: 'kernel-lsp.optimizeAtCursor',
    openLastReport: 'kernel-lsp.openLastReport',
    showLog: 'kernel-lsp.showLog',
    setApiKey: 'kernel-lsp.setApiKey',
} as const;

/** Commands the server runs via workspace/executeCommand. */
export const ServerCommands = {
    optimize: 'kernelLsp.optimize',
    lastReport: 'kernelLsp.lastReport',
} as const;

/** Server → client notification carrying the device and what the server is busy with. */
export const STATUS_NOTIFICATION = 'kernelLsp/status';

/** The only channel by which the LLM key reaches the server. */
export const API_KEY_ENV = 'OPENAI_API_KEY';
/** SecretStorage key under which `kernel-lsp: Set LLM API Key` stores the key. */
export const API_KEY_SECRET = 'kernelLsp.llm.apiKey';
