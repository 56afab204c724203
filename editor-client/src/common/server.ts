// Creating the LanguageClient for the kernel-lsp server.

import * as vscode from 'vscode';
import { LanguageClient, LanguageClientOptions, RevealOutputChannelOn, ServerOptions } from 'vscode-languageclient/node';
import { SERVER_NAME, SETTINGS_SECTION, ServerCommands } from './constants';
import { ServerCommand } from './interpreter';
import { KernelLspSettings, PathContext, ServerLaunchOptions, normalizeSettings } from './settings';

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

/** The `kernelLsp` section for a resource, normalized. */
export function readSettings(resource?: vscode.Uri): KernelLspSettings {
    const raw = vscode.workspace.getConfiguration(undefined, resource).get(SETTINGS_SECTION);
    return normalizeSettings(raw, pathContextFor(resource));
}

export interface ClientHooks {
    /** Called with the result of every `kernelLsp.optimize`, including runs from the code action. */
    onOptimizeResult(result: OptimizeResult): void;
}

export function createClient(
    command: ServerCommand,
    launch: ServerLaunchOptions,
    outputChannel: vscode.LogOutputChannel,
    hooks: ClientHooks,
): LanguageClient {
    const serverOptions: ServerOptions = {
        command: command.command,
        args: command.args,
        // The workspace folder as cwd lets the server find the project's pyproject.toml.
        options: { env: launch.env, cwd: vscode.workspace.workspaceFolders?.[0]?.uri.fsPath },
    };
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
                // Answer workspace/configuration with the same normalized shape as
                // initializationOptions, so the server never sees two different formats.
                configuration: async (params, token, next) => {
                    const answers = await next(params, token);
                    if (!Array.isArray(answers)) {
                        return answers; // A ResponseError: pass it on.
                    }
                    const values: unknown[] = answers;
                    return params.items.map((item, index): unknown =>
                        item.section === SETTINGS_SECTION
                            ? normalizeSettings(values[index], pathContextFor(item.scopeUri ? vscode.Uri.parse(item.scopeUri) : undefined))
                            : values[index],
                    );
                },
            },
            // The code action "Optimize <kernel> (FSR)" runs kernelLsp.optimize through here too,
            // so this is the one place that tells the user how an optimization went.
            executeCommand: async (commandName, args, next) => {
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
