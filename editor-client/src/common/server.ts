// Creating the LanguageClient for the kernel-lsp server.

import * as vscode from 'vscode';
import { LanguageClient, LanguageClientOptions, RevealOutputChannelOn, ServerOptions } from 'vscode-languageclient/node';
import { SERVER_NAME, SETTINGS_SECTION, ServerCommands } from './constants';
import { ServerCommand, serverSpawn } from './interpreter';
import { KernelLspSettings, PathContext, ServerLaunchOptions, normalizeSettings } from './settings';
import { applyWorkspaceTrust, withUserScopeOnly } from './trust';

/** Result of the server's `kernelLsp.optimize` command. */
export interface OptimizeResult {
    applied: boolean;
    reportUri: string | null;
    message: string;
}

export function isOptimizeResult(value: unknown): value is OptimizeResult {
    const candidate = value as Partial<OptimizeResult> | null;
    return typeof candidate === 'object' && candidate !== null && typeof candidate.message === 'string';
}

/** `${workspaceFolder}` for a resource: its own folder, else the first one. */
export function pathContextFor(resource: vscode.Uri | undefined): PathContext {
    const folder = (resource && vscode.workspace.getWorkspaceFolder(resource)) ?? vscode.workspace.workspaceFolders?.[0];
    return { workspaceFolder: folder?.uri.fsPath, userHome: process.env.HOME ?? process.env.USERPROFILE ?? '~' };
}

/**
 * The `kernelLsp` section for a resource, normalized, as the server gets it: the settings that name
 * a program or an endpoint from user settings only (`onIgnored` hears of workspace values left out),
 * and no spec runs in an untrusted workspace.
 */
export function readSettings(resource?: vscode.Uri, onIgnored?: (names: string[]) => void): KernelLspSettings {
    const raw = vscode.workspace.getConfiguration(undefined, resource).get(SETTINGS_SECTION);
    const scoped = vscode.workspace.getConfiguration(SETTINGS_SECTION, resource);
    const { section, ignored } = withUserScopeOnly(raw, (key) => scoped.inspect(key));
    if (ignored.length > 0) {
        onIgnored?.(ignored);
    }
    return applyWorkspaceTrust(normalizeSettings(section, pathContextFor(resource)), vscode.workspace.isTrusted);
}

export interface ClientHooks {
    /** Called with the result of every `kernelLsp.optimize`, including runs from the code action. */
    onOptimizeResult(result: OptimizeResult): void;
    /** Called before `kernelLsp.optimize` is sent, from the command or the code action; false stops it. */
    mayOptimize(): boolean;
    /** Called with the names of user-only settings whose workspace value was ignored. */
    onIgnoredWorkspaceSettings(names: string[]): void;
}

export function createClient(
    command: ServerCommand,
    launch: ServerLaunchOptions,
    cwd: string,
    outputChannel: vscode.LogOutputChannel,
    hooks: ClientHooks,
): LanguageClient {
    // The working directory is outside the workspace (see chooseWorkingDirectory): the server finds
    // each project's files from the workspace folders and file paths it is sent, never from its cwd.
    const serverOptions: ServerOptions = serverSpawn(command, launch.env, cwd);
    const clientOptions: LanguageClientOptions = {
        documentSelector: [
            { scheme: 'file', language: 'cuda-cpp' },
            { scheme: 'untitled', language: 'cuda-cpp' },
        ],
        outputChannel,
        traceOutputChannel: outputChannel,
        revealOutputChannelOn: RevealOutputChannelOn.Never,
        initializationOptions: launch.initializationOptions,
        // Sends workspace/didChangeConfiguration when a kernelLsp.* setting changes; the server then
        // pulls the new values through workspace/configuration (the middleware below).
        synchronize: { configurationSection: SETTINGS_SECTION },
        middleware: {
            workspace: {
                // Answer workspace/configuration with exactly what initializationOptions held
                // (readSettings: normalized, user-only settings from user settings, trust applied),
                // so the server never sees two different formats nor a value the launch refused.
                configuration: async (params, token, next) => {
                    const answers = await next(params, token);
                    if (!Array.isArray(answers)) {
                        return answers; // A ResponseError: pass it on.
                    }
                    const values: unknown[] = answers;
                    return params.items.map((item, index): unknown =>
                        item.section === SETTINGS_SECTION
                            ? readSettings(item.scopeUri ? vscode.Uri.parse(item.scopeUri) : undefined, (names) => {
                                  hooks.onIgnoredWorkspaceSettings(names);
                              })
                            : values[index],
                    );
                },
            },
            // The code action "Optimize <kernel> (FSR)" runs kernelLsp.optimize through here too,
            // so this is the one place that tells the user how an optimization went.
            executeCommand: async (commandName, args, next) => {
                if (commandName === ServerCommands.optimize && !hooks.mayOptimize()) {
                    return undefined;
                }
                const result: unknown = await next(commandName, args);
                if (commandName === ServerCommands.optimize && isOptimizeResult(result)) {
                    hooks.onOptimizeResult(result);
                }
                return result;
            },
        },
    };
    return new LanguageClient(SETTINGS_SECTION, SERVER_NAME, serverOptions, clientOptions);
}
