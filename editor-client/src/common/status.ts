// The `kernelLsp/status` notification → status bar text. Pure: unit-tested under plain node.

export type Busy = 'checking' | 'optimizing';

/** Params of the server's `kernelLsp/status` notification. */
export interface ServerStatus {
    /** GPU name; null when the server runs compile-only. */
    device: string | null;
    busy: Busy | null;
    detail?: string;
}

export interface StatusBarText {
    /** Status bar text, with `$(icon)` codicons. */
    text: string;
    tooltip: string;
}

export const COMPILE_ONLY = 'compile-only (no GPU)';

/** Accepts only well-formed params: a malformed notification must not break the status bar. */
export function parseServerStatus(params: unknown): ServerStatus | undefined {
    if (typeof params !== 'object' || params === null) {
        return undefined;
    }
    const { device, busy, detail } = params as Record<string, unknown>;
    if (device !== null && typeof device !== 'string') {
        return undefined;
    }
    if (busy !== null && busy !== undefined && busy !== 'checking' && busy !== 'optimizing') {
        return undefined;
    }
    return {
        device,
        busy: busy ?? null,
        ...(typeof detail === 'string' && detail !== '' ? { detail } : {}),
    };
}

export function describeStatus(status: ServerStatus): StatusBarText {
    const where = status.device ?? COMPILE_ONLY;
    const icon = status.busy ? '$(sync~spin)' : status.device ? '$(chip)' : '$(circle-slash)';
    const tooltipLines = [`kernel-lsp: ${where}`];
    if (status.busy) {
        tooltipLines.push(status.busy === 'checking' ? 'Checking…' : 'Optimizing…');
    }
    if (status.detail) {
        tooltipLines.push(status.detail);
    }
    tooltipLines.push('Click to show the server log.');
    return { text: `${icon} ${where}`, tooltip: tooltipLines.join('\n') };
}
