// A stand-in for the kernel-lsp server's optimizer, for the end-to-end test: the real optimizer
// needs a GPU, but what the extension must get right does not. On `kernelLsp.optimize` this
// server does what the real one does: it sends a workspace/applyEdit whose change annotation has
// needsConfirmation=true, waits for the answer, and returns { applied, reportUri, message }.
// Plain JSON-RPC over stdio, no dependencies.

import { writeFileSync } from 'node:fs';

const OPTIMIZED_MARKER = '// optimized by the fake FSR server';
const reportPath = process.env.FAKE_REPORT_PATH;

let nextId = 1;
const pending = new Map();

function send(message) {
    const body = Buffer.from(JSON.stringify({ jsonrpc: '2.0', ...message }), 'utf8');
    process.stdout.write(`Content-Length: ${body.length}\r\n\r\n`);
    process.stdout.write(body);
}

function request(method, params) {
    const id = nextId++;
    send({ id, method, params });
    return new Promise((resolve) => pending.set(id, resolve));
}

async function optimize({ uri, kernel }) {
    const edit = {
        documentChanges: [
            {
                textDocument: { uri, version: null },
                edits: [
                    {
                        range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } },
                        newText: `${OPTIMIZED_MARKER}: ${kernel}\n`,
                        annotationId: 'fsr',
                    },
                ],
            },
        ],
        changeAnnotations: {
            fsr: { label: `Optimize ${kernel} (FSR)`, needsConfirmation: true, description: 'fake' },
        },
    };
    const answer = await request('workspace/applyEdit', { label: `Optimize ${kernel}`, edit });
    if (reportPath) {
        writeFileSync(reportPath, `# Report for ${kernel}\n\napplied: ${answer.applied}\n`);
    }
    return {
        applied: answer.applied === true,
        reportUri: reportPath ? `file://${reportPath}` : null,
        message: answer.applied ? `Optimized ${kernel} (fake).` : `Optimization of ${kernel} not applied.`,
    };
}

async function handle(message) {
    if (message.method === undefined) {
        pending.get(message.id)?.(message.result ?? {});
        pending.delete(message.id);
        return;
    }
    const reply = (result) => send({ id: message.id, result });
    switch (message.method) {
        case 'initialize':
            reply({
                capabilities: {
                    textDocumentSync: 1,
                    executeCommandProvider: { commands: ['kernelLsp.optimize', 'kernelLsp.lastReport'] },
                },
                serverInfo: { name: 'fake-kernel-lsp' },
            });
            break;
        case 'initialized':
            send({ method: 'kernelLsp/status', params: { device: 'Fake GPU 9000', busy: null } });
            break;
        case 'workspace/executeCommand':
            if (message.params.command === 'kernelLsp.optimize') {
                send({ method: 'kernelLsp/status', params: { device: 'Fake GPU 9000', busy: 'optimizing' } });
                const result = await optimize(message.params.arguments[0]);
                send({ method: 'kernelLsp/status', params: { device: 'Fake GPU 9000', busy: null } });
                reply(result);
            } else {
                reply({ reportUri: reportPath ? `file://${reportPath}` : null });
            }
            break;
        case 'shutdown':
            reply(null);
            break;
        case 'exit':
            process.exit(0);
            break;
        default:
            if (message.id !== undefined) {
                reply(null);
            }
    }
}

let buffer = Buffer.alloc(0);
process.stdin.on('data', (chunk) => {
    buffer = Buffer.concat([buffer, chunk]);
    for (;;) {
        const headerEnd = buffer.indexOf('\r\n\r\n');
        if (headerEnd < 0) {
            return;
        }
        const length = Number(/Content-Length: (\d+)/i.exec(buffer.subarray(0, headerEnd).toString())?.[1]);
        if (buffer.length < headerEnd + 4 + length) {
            return;
        }
        const body = buffer.subarray(headerEnd + 4, headerEnd + 4 + length).toString('utf8');
        buffer = buffer.subarray(headerEnd + 4 + length);
        void handle(JSON.parse(body));
    }
});
