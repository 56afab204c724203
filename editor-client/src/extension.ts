// Entry point: starts the kernel-lsp server and wires its features to commands and the status bar.

import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as vscode from 'vscode';
import { ExecuteCommandRequest, LanguageClient } from 'vscode-languageclient/node';
import { BootstrapResult, ensureServerEnvironment, findBundledWheel, isEnvironmentCurrent } from './common/bootstrap';
import {
    API_KEY_ENV,
    API_KEY_SECRET,
    Commands,
    SERVER_MODULE,
    SERVER_NAME,
    SETTINGS_SECTION,
    STATUS_NOTIFICATION,
    ServerCommands,
} from './common/constants';
import { checkModuleImports } from './common/installCheck';
import {
    FALLBACK_PYTHON,
    ServerCommand,
    formatCommand,
    notInstalledMessage,
    resolveServerCommand,
    runModule,
} from './common/interpreter';
import { findKernelAtCursor, findKernels } from './common/kernels';
import { isPythonExtensionInstalled, onDidChangeSelectedInterpreter, selectedInterpreter } from './common/python';
import { OptimizeResult, createClient, isOptimizeResult, readSettings } from './common/server';
import { toServerLaunchOptions } from './common/settings';
import { describeStatus, parseServerStatus } from './common/status';
import { chooseWorkingDirectory, ignoredWorkspaceSettingMessage } from './common/trust';

let client: LanguageClient | undefined;
let log: vscode.LogOutputChannel;
let statusItem: vscode.StatusBarItem;
let secrets: vscode.SecretStorage;
let extensionContext: vscode.ExtensionContext;
/** User-only settings whose workspace value the user was already told about (once per session). */
const warnedIgnoredSettings = new Set<string>();
/** Restarts run one after another: two overlapping starts would leave two servers running. */
let restartQueue: Promise<void> = Promise.resolve();

export async function activate(context: vscode.ExtensionContext): Promise<void> {
    secrets = context.secrets;
    extensionContext = context;
    log = vscode.window.createOutputChannel(SERVER_NAME, { log: true });
    statusItem = vscode.window.createStatusBarItem(`${SETTINGS_SECTION}.status`, vscode.StatusBarAlignment.Right, 100);
    statusItem.name = SERVER_NAME;
    statusItem.command = Commands.showLog;
    context.subscriptions.push(log, statusItem);

    context.subscriptions.push(
        vscode.commands.registerCommand(Commands.restart, () => restart('restart command')),
        vscode.commands.registerCommand(Commands.showLog, () => {
            log.show();
        }),
        vscode.commands.registerCommand(Commands.optimizeAtCursor, optimizeAtCursor),
        vscode.commands.registerCommand(Commands.openLastReport, openLastReport),
        vscode.commands.registerCommand(Commands.setApiKey, setApiKey),
        vscode.workspace.onDidChangeConfiguration((event) => {
            // Every other kernelLsp.* setting reaches the running server through
            // workspace/didChangeConfiguration; only a different server process needs a restart.
            if (
                event.affectsConfiguration(`${SETTINGS_SECTION}.server.path`) ||
                event.affectsConfiguration(`${SETTINGS_SECTION}.interpreter`)
            ) {
                void restart('server command setting changed');
            }
        }),
        // Trust changes what the server may run (specs) and which interpreter it may use.
        vscode.workspace.onDidGrantWorkspaceTrust(() => restart('workspace trusted')),
        // The key reaches the server only through its environment, which is fixed at spawn.
        context.secrets.onDidChange((event) => {
            if (event.key === API_KEY_SECRET) {
                void restart('LLM API key changed');
            }
        }),
    );

    // Without a configured command the Python extension's choice is the server's interpreter.
    context.subscriptions.push(
        await onDidChangeSelectedInterpreter(() => {
            const settings = readSettings(undefined, warnIgnoredWorkspaceSettings);
            if (settings.server.path.length === 0 && settings.interpreter.length === 0) {
                void restart('Python extension interpreter changed');
            }
        }),
    );

    await restart('activation');
}

export async function deactivate(): Promise<void> {
    await stopClient();
}

function restart(reason: string): Promise<void> {
    restartQueue = restartQueue.then(() => startServer(reason)).catch((error: unknown) => {
        log.error(`Starting the server failed: ${String(error)}`);
    });
    return restartQueue;
}

async function stopClient(): Promise<void> {
    const running = client;
    client = undefined;
    if (running) {
        try {
            await running.stop();
        } catch (error) {
            log.warn(`Stopping the server: ${String(error)}`);
        }
        await running.dispose();
    }
}

function showStatus(text: string, tooltip: string): void {
    statusItem.text = text;
    statusItem.tooltip = tooltip;
    statusItem.show();
}

async function startServer(reason: string): Promise<void> {
    await stopClient();
    showStatus('$(sync~spin) kernel-lsp', 'kernel-lsp: starting…');

    const resource = vscode.window.activeTextEditor?.document.uri;
    const settings = readSettings(resource, warnIgnoredWorkspaceSettings);
    const cwd = serverWorkingDirectory();
    const resolved = resolveServerCommand({
        serverPath: settings.server.path,
        interpreter: settings.interpreter,
        pythonExtensionInterpreter: await selectedInterpreter(resource),
        untrustedFolders: vscode.workspace.isTrusted ? [] : workspaceFolderPaths(),
    });
    if (resolved.note) {
        log.warn(resolved.note);
    }
    const launch = toServerLaunchOptions(settings, process.env, await secrets.get(API_KEY_SECRET));
    const command = resolved.python ? await importableServer(resolved, launch.env, cwd) : resolved;
    if (!command) {
        return; // The user has been told why.
    }
    // Never log `launch.env`: it may hold the API key.
    log.info(`Starting (${reason}): ${formatCommand([command.command, ...command.args])} [from ${command.source}] in ${cwd}`);

    const newClient = createClient(command, launch, cwd, log, {
        onOptimizeResult: reportOptimizeResult,
        mayOptimize,
        onIgnoredWorkspaceSettings: warnIgnoredWorkspaceSettings,
    });
    // An object, not a boolean local: the handler sets it while `start()` is awaited.
    const serverStatus = { reported: false };
    newClient.onNotification(STATUS_NOTIFICATION, (params: unknown) => {
        const status = parseServerStatus(params);
        if (status) {
            serverStatus.reported = true;
            const { text, tooltip } = describeStatus(status);
            showStatus(text, tooltip);
        }
    });
    client = newClient;
    try {
        await newClient.start();
        // Until the server reports its device, say that it runs.
        if (!serverStatus.reported) {
            showStatus('$(check) kernel-lsp', 'kernel-lsp: running');
        }
    } catch (error) {
        log.error(`The server did not start: ${String(error)}`);
        showStatus('$(error) kernel-lsp', 'kernel-lsp is not running: see the log');
        const choice = await vscode.window.showErrorMessage(
            `kernel-lsp: the server did not start (${formatCommand([command.command, ...command.args])}).`,
            'Show Log',
            'Open Settings',
        );
        if (choice === 'Show Log') {
            log.show();
        } else if (choice === 'Open Settings') {
            await vscode.commands.executeCommand('workbench.action.openSettings', SETTINGS_SECTION);
        }
    }
}

function workspaceFolderPaths(): string[] {
    return (vscode.workspace.workspaceFolders ?? []).filter((folder) => folder.uri.scheme === 'file').map((folder) => folder.uri.fsPath);
}

/** Outside every workspace folder, so the workspace can neither shadow modules nor anchor relative paths. */
function serverWorkingDirectory(): string {
    const storage = extensionContext.globalStorageUri.fsPath;
    mkdirSync(storage, { recursive: true });
    return chooseWorkingDirectory([storage, tmpdir()], workspaceFolderPaths());
}

/**
 * `command` if its interpreter imports kernel_lsp; else, unless the user chose that interpreter in
 * kernelLsp.interpreter, the server bundled in the .vsix, installed into the extension's own
 * environment. Undefined after telling the user why neither works.
 */
async function importableServer(command: ServerCommand, env: Record<string, string>, cwd: string): Promise<ServerCommand | undefined> {
    const python = command.python ?? [FALLBACK_PYTHON];
    const check = await checkModuleImports(python, SERVER_MODULE, { env, cwd });
    if (check.kind === 'ok') {
        return command;
    }
    log.info(`${formatCommand(python)} -I -c "import ${SERVER_MODULE}" failed: ${check.error}`);
    const wheel = findBundledWheel(join(extensionContext.extensionPath, 'bundled'));
    if (wheel && command.source !== 'kernelLsp.interpreter') {
        const result = await installBundledServer(python, wheel, env, cwd);
        if (result.kind === 'ready') {
            return runModule(result.python, 'bundled environment');
        }
        log.error(result.message);
        showStatus('$(error) kernel-lsp', 'kernel-lsp is not running: its server could not be installed');
        void vscode.window.showErrorMessage(result.message, 'Show Log').then((choice) => {
            if (choice) {
                log.show();
            }
        });
        return undefined;
    }
    showStatus('$(error) kernel-lsp', 'kernel-lsp is not running: not installed in the selected interpreter');
    void offerInstallFix(
        check.kind === 'noInterpreter'
            ? `The Python interpreter ${formatCommand(python)} (from ${command.source}) could not be run. Select another interpreter or set kernelLsp.interpreter.`
            : notInstalledMessage(command),
    );
    return undefined;
}

/** Creates (once) the extension's own environment with the bundled wheel; pip's output goes to the log. */
async function installBundledServer(python: string[], wheel: string, env: Record<string, string>, cwd: string): Promise<BootstrapResult> {
    // pip and venv need no API key.
    const installEnv = Object.fromEntries(Object.entries(env).filter(([name]) => name !== API_KEY_ENV));
    const basePythons = formatCommand(python) === FALLBACK_PYTHON ? [python] : [python, [FALLBACK_PYTHON]];
    const options = {
        basePythons,
        storageDir: extensionContext.globalStorageUri.fsPath,
        wheel,
        env: installEnv,
        cwd,
        log: (line: string) => {
            log.info(line);
        },
    };
    if (isEnvironmentCurrent(options.storageDir, wheel)) {
        return ensureServerEnvironment({ ...options, progress: () => undefined });
    }
    log.info(`Installing the bundled server ${wheel} into ${options.storageDir}`);
    showStatus('$(sync~spin) kernel-lsp', 'kernel-lsp: installing its server (see the log)…');
    return vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: 'kernel-lsp' },
        (progress) =>
            ensureServerEnvironment({
                ...options,
                progress: (message) => {
                    progress.report({ message });
                },
            }),
    );
}

/** Optimizing runs the workspace's spec: not in Restricted Mode. */
function mayOptimize(): boolean {
    if (vscode.workspace.isTrusted) {
        return true;
    }
    const manage = 'Manage Workspace Trust';
    void vscode.window
        .showWarningMessage(
            "kernel-lsp: optimizing runs this workspace's spec (Python code), which Restricted Mode does not allow. Trust the folder to optimize.",
            manage,
        )
        .then((choice) => {
            if (choice === manage) {
                void vscode.commands.executeCommand('workbench.trust.manage');
            }
        });
    return false;
}

function warnIgnoredWorkspaceSettings(names: string[]): void {
    const fresh = names.filter((name) => !warnedIgnoredSettings.has(name));
    if (fresh.length === 0) {
        return;
    }
    for (const name of fresh) {
        warnedIgnoredSettings.add(name);
    }
    const message = ignoredWorkspaceSettingMessage(fresh);
    log.warn(message);
    const open = 'Open User Settings';
    void vscode.window.showWarningMessage(message, open).then((choice) => {
        if (choice === open) {
            void vscode.commands.executeCommand('workbench.action.openSettings', fresh[0]);
        }
    });
}

async function offerInstallFix(message: string): Promise<void> {
    const selectInterpreter = 'Select Interpreter';
    const openSettings = 'Open Settings';
    const actions = isPythonExtensionInstalled() ? [selectInterpreter, openSettings] : [openSettings];
    const choice = await vscode.window.showErrorMessage(message, ...actions, 'Show Log');
    if (choice === selectInterpreter) {
        // Selecting fires onDidChangeActiveEnvironmentPath, which restarts the server.
        await vscode.commands.executeCommand('python.setInterpreter');
    } else if (choice === openSettings) {
        await vscode.commands.executeCommand('workbench.action.openSettings', `${SETTINGS_SECTION}.interpreter`);
    } else if (choice === 'Show Log') {
        log.show();
    }
}

function runningClient(): LanguageClient | undefined {
    if (client?.isRunning()) {
        return client;
    }
    void vscode.window.showErrorMessage('kernel-lsp: the server is not running.', 'Show Log').then((choice) => {
        if (choice) {
            log.show();
        }
    });
    return undefined;
}

async function optimizeAtCursor(): Promise<void> {
    if (!mayOptimize()) {
        return;
    }
    const editor = vscode.window.activeTextEditor;
    if (!editor) {
        void vscode.window.showWarningMessage('kernel-lsp: open a CUDA file and put the cursor in a kernel.');
        return;
    }
    const text = editor.document.getText();
    let kernel = findKernelAtCursor(text, editor.document.offsetAt(editor.selection.active));
    if (!kernel) {
        // Cursor above every kernel: let the user pick rather than fail.
        const names = findKernels(text).map((declaration) => declaration.name);
        if (names.length === 0) {
            void vscode.window.showWarningMessage('kernel-lsp: no __global__ kernel in this file.');
            return;
        }
        kernel = names.length === 1 ? names[0] : await vscode.window.showQuickPick(names, { placeHolder: 'Kernel to optimize' });
        if (!kernel) {
            return;
        }
    }
    const languageClient = runningClient();
    if (!languageClient) {
        return;
    }
    // The server sends the new code as a workspace/applyEdit whose change annotation needs
    // confirmation, so VS Code shows the refactor preview; the request returns once the user has
    // applied or discarded it. Saving first makes the server optimize what the user sees.
    await editor.document.save();
    const result: unknown = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Window, title: `kernel-lsp: optimizing ${kernel}` },
        () =>
            languageClient.sendRequest(ExecuteCommandRequest.type, {
                command: ServerCommands.optimize,
                arguments: [{ uri: editor.document.uri.toString(), kernel }],
            }),
    );
    if (isOptimizeResult(result)) {
        reportOptimizeResult(result);
    }
}

function reportOptimizeResult(result: OptimizeResult): void {
    const openReport = 'Open Report';
    const actions = result.reportUri ? [openReport] : [];
    const shown = result.applied
        ? vscode.window.showInformationMessage(result.message, ...actions)
        : vscode.window.showWarningMessage(result.message, ...actions);
    void shown.then((choice) => {
        if (choice === openReport && result.reportUri) {
            void openReportUri(result.reportUri);
        }
    });
}

async function openLastReport(): Promise<void> {
    const languageClient = runningClient();
    if (!languageClient) {
        return;
    }
    const result: unknown = await languageClient.sendRequest(ExecuteCommandRequest.type, {
        command: ServerCommands.lastReport,
        arguments: [],
    });
    const reportUri = (result as { reportUri?: unknown } | null)?.reportUri;
    if (typeof reportUri !== 'string' || reportUri === '') {
        void vscode.window.showInformationMessage('kernel-lsp: no optimization report yet.');
        return;
    }
    await openReportUri(reportUri);
}

async function openReportUri(reportUri: string): Promise<void> {
    const uri = vscode.Uri.parse(reportUri);
    if (uri.scheme === 'http' || uri.scheme === 'https') {
        await vscode.env.openExternal(uri);
    } else if (uri.path.endsWith('.md')) {
        await vscode.commands.executeCommand('markdown.showPreview', uri);
    } else {
        await vscode.window.showTextDocument(uri, { preview: false });
    }
}

async function setApiKey(): Promise<void> {
    const key = await vscode.window.showInputBox({
        title: 'kernel-lsp: LLM API key',
        prompt: 'Stored in VS Code SecretStorage and given to the server as OPENAI_API_KEY. Leave empty to remove it.',
        password: true,
        ignoreFocusOut: true,
    });
    if (key === undefined) {
        return; // Cancelled.
    }
    // Storing fires secrets.onDidChange, which restarts the server with the new key.
    if (key.trim() === '') {
        await secrets.delete(API_KEY_SECRET);
        void vscode.window.showInformationMessage('kernel-lsp: API key removed; OPENAI_API_KEY from the environment applies.');
    } else {
        await secrets.store(API_KEY_SECRET, key.trim());
        void vscode.window.showInformationMessage('kernel-lsp: API key stored.');
    }
}
