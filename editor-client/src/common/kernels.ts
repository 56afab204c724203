// Finding `__global__` kernels in CUDA source text. Pure: unit-tested under plain node.
//
// This is a scanner, not a parser: good enough to name the kernel the user is looking at. The
// server decides whether that kernel can actually be optimized.

export interface KernelDeclaration {
    name: string;
    /** Offset where the declaration starts: its `template <...>` line, else the `__global__` line. */
    start: number;
    /** Offset of the kernel's name. */
    nameOffset: number;
}

/**
 * Identifiers that take a parenthesized argument between `__global__` and the kernel's name
 * (`__global__ void __launch_bounds__(256) k(...)`): skipped, with their arguments.
 */
const ATTRIBUTE_LIKE = new Set([
    '__launch_bounds__',
    '__maxnreg__',
    '__cluster_dims__',
    '__attribute__',
    '__declspec',
    'alignas',
    'decltype',
]);

/**
 * Blanks out comments, string and character literals, and preprocessor lines, keeping every offset
 * and newline, so that `// __global__ void old(...)` or `#define KERNEL __global__` is not a kernel.
 */
export function maskNonCode(text: string): string {
    const out = text.split('');
    const blank = (from: number, to: number) => {
        for (let i = from; i < to; i++) {
            if (out[i] !== '\n') {
                out[i] = ' ';
            }
        }
    };
    let i = 0;
    let atLineStart = true;
    while (i < text.length) {
        const c = text[i];
        const next = text[i + 1];
        if (c === '/' && next === '/') {
            const end = text.indexOf('\n', i);
            const stop = end === -1 ? text.length : end;
            blank(i, stop);
            i = stop;
        } else if (c === '/' && next === '*') {
            const end = text.indexOf('*/', i + 2);
            const stop = end === -1 ? text.length : end + 2;
            blank(i, stop);
            i = stop;
        } else if (c === '"' || c === "'") {
            let j = i + 1;
            while (j < text.length && text[j] !== c && text[j] !== '\n') {
                j += text[j] === '\\' ? 2 : 1;
            }
            blank(i, Math.min(j + 1, text.length));
            i = j + 1;
        } else if (c === '#' && atLineStart) {
            // A directive runs to the end of the line, and past it while lines end in a backslash.
            let j = i;
            while (j < text.length && !(text[j] === '\n' && text[j - 1] !== '\\')) {
                j++;
            }
            blank(i, j);
            i = j;
        } else {
            if (c === '\n') {
                atLineStart = true;
            } else if (c !== ' ' && c !== '\t' && c !== '\r') {
                atLineStart = false;
            }
            i++;
        }
    }
    return out.join('');
}

function skipSpaces(code: string, from: number): number {
    let i = from;
    while (i < code.length && /\s/.test(code[i])) {
        i++;
    }
    return i;
}

/** Offset just past the parenthesis group that opens at `open`. */
function skipParens(code: string, open: number): number {
    let depth = 0;
    for (let i = open; i < code.length; i++) {
        if (code[i] === '(') {
            depth++;
        } else if (code[i] === ')' && --depth === 0) {
            return i + 1;
        }
    }
    return code.length;
}

/** The kernel name after a `__global__` token: the first identifier called like a function. */
function kernelNameAfter(code: string, from: number): { name: string; offset: number } | undefined {
    const identifier = /[A-Za-z_]\w*|[;{}]/g;
    identifier.lastIndex = from;
    let match: RegExpExecArray | null;
    while ((match = identifier.exec(code)) !== null) {
        const token = match[0];
        if (token === ';' || token === '{' || token === '}') {
            return undefined; // Reached a body or the end of a statement without a name.
        }
        const after = skipSpaces(code, match.index + token.length);
        if (code[after] !== '(') {
            continue;
        }
        if (ATTRIBUTE_LIKE.has(token)) {
            identifier.lastIndex = skipParens(code, after);
            continue;
        }
        return { name: token, offset: match.index };
    }
    return undefined;
}

function lineStart(code: string, offset: number): number {
    return code.lastIndexOf('\n', offset - 1) + 1;
}

/** Moves a declaration's start up to a `template <...>` line right above it, if there is one. */
function includeTemplateLine(code: string, start: number): number {
    if (start === 0) {
        return start;
    }
    const previousStart = lineStart(code, start - 1);
    const previousLine = code.slice(previousStart, start - 1);
    return /^\s*template\s*</.test(previousLine) ? previousStart : start;
}

/** Every `__global__` kernel in the text, in source order. */
export function findKernels(text: string): KernelDeclaration[] {
    const code = maskNonCode(text);
    const kernels: KernelDeclaration[] = [];
    const globalToken = /\b__global__\b/g;
    let match: RegExpExecArray | null;
    while ((match = globalToken.exec(code)) !== null) {
        const found = kernelNameAfter(code, match.index + match[0].length);
        if (found) {
            const start = includeTemplateLine(code, lineStart(code, match.index));
            kernels.push({ name: found.name, start, nameOffset: found.offset });
        }
    }
    return kernels;
}

/**
 * The kernel at or above the cursor: the last kernel whose declaration starts at or before the
 * cursor's line. Undefined when the cursor is above every kernel.
 */
export function findKernelAtCursor(text: string, cursorOffset: number): string | undefined {
    const cursorLineStart = lineStart(text, Math.min(cursorOffset, text.length));
    let atCursor: string | undefined;
    for (const kernel of findKernels(text)) {
        if (kernel.start > cursorLineStart) {
            break;
        }
        atCursor = kernel.name;
    }
    return atCursor;
}
