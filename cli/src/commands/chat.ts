import { InvalidArgumentError, type Command } from 'commander';
import { ApiError, sseFrames, type ChatCompletionInput, type SvcClient } from '@svc/shared/client';
import { context, keyClient, type Context } from '../context.ts';
import { CliError, EXIT_FAILURE, streamedError, usageError } from '../errors.ts';
import { readStdin } from '../input.ts';
import { progress } from '../progress.ts';
import { usd } from '../output.ts';

interface ChatOptions {
  model?: string;
  system?: string;
  maxTokens?: number;
}

/** The receipt event that ends every inference stream (the fields of the x-svc-* headers). */
export interface StreamReceipt {
  id: string;
  receipt: { cost_micro_usd?: number; [k: string]: unknown };
  canonical: string;
  hash: string;
  signature: string;
  signer: string;
}

interface ChatResult {
  id: string | null;
  model: string;
  content: string;
  finish_reason: string | null;
  usage: Record<string, unknown> | null;
  receipt: StreamReceipt | null;
}

function positiveInt(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError('expected a whole number of tokens, at least 1');
  return n;
}

async function modelIds(client: SvcClient): Promise<string[]> {
  return (await client.models()).data.map((m) => m.id);
}

/** --model, else SVC_MODEL, else the gateway's only model. */
async function chooseModel(ctx: Context, given: string | undefined): Promise<string> {
  const m = given ?? (ctx.env.SVC_MODEL?.trim() || undefined);
  if (m) return m;
  const ids = await modelIds(ctx.client);
  if (ids.length === 1) return ids[0]!;
  if (ids.length === 0) throw new CliError(`the gateway at ${ctx.url} serves no models`, EXIT_FAILURE, 'an operator configures providers (SVC_PROVIDERS) or enrolls inference nodes');
  throw usageError('which model? the gateway serves several', `pass --model (or set SVC_MODEL) to one of: ${ids.join(', ')}`);
}

async function prompt(words: readonly string[]): Promise<string> {
  if (words.length > 0) return words.join(' ');
  if (process.stdin.isTTY) throw usageError('no prompt given', 'pass it as an argument (`svc chat "Hello"`) or pipe it on stdin');
  const text = (await readStdin()).trim();
  if (!text) throw usageError('the prompt on stdin is empty');
  return text;
}

/** An error chunk inside the stream (the upstream failed after the answer began). */
function streamError(chunk: Record<string, unknown>): Error | null {
  const e = chunk.error as { type?: string; message?: string } | undefined;
  if (!e || typeof e !== 'object') return null;
  return streamedError({ message: 'the answer stopped', ...e }, 'retry the request');
}

/** Streams the answer: text to `write` as it arrives; the receipt from the final event. */
async function streamChat(client: SvcClient, body: ChatCompletionInput, write: (text: string) => void, firstToken: () => void): Promise<ChatResult> {
  const res = await client.chatCompletionStream(body);
  const out: ChatResult = { id: null, model: body.model, content: '', finish_reason: null, usage: null, receipt: null };
  let done = false;
  for await (const f of sseFrames(res)) {
    if (f.event === 'receipt') {
      out.receipt = JSON.parse(f.data) as StreamReceipt;
      continue;
    }
    if (done || f.data === '') continue;
    if (f.data === '[DONE]') {
      done = true;
      continue;
    }
    let chunk: Record<string, unknown>;
    try {
      chunk = JSON.parse(f.data) as Record<string, unknown>;
    } catch {
      continue;
    }
    const failed = streamError(chunk) ?? (f.event === 'error' ? streamedError({ message: 'the answer stopped' }, 'retry the request') : null);
    if (failed) throw failed;
    if (typeof chunk.id === 'string') out.id = chunk.id;
    if (typeof chunk.model === 'string') out.model = chunk.model;
    if (chunk.usage && typeof chunk.usage === 'object') out.usage = chunk.usage as Record<string, unknown>;
    for (const c of (chunk.choices as Array<{ delta?: { content?: unknown }; finish_reason?: unknown }> | undefined) ?? []) {
      const text = typeof c.delta?.content === 'string' ? c.delta.content : '';
      if (text) {
        if (!out.content) firstToken();
        out.content += text;
        write(text);
      }
      if (typeof c.finish_reason === 'string') out.finish_reason = c.finish_reason;
    }
  }
  if (!done) throw new CliError('the answer stopped before its end (the connection closed)', EXIT_FAILURE, 'retry the request');
  return out;
}

export function receiptLine(receipt: StreamReceipt | null, extra = ''): string {
  if (!receipt) return `no receipt came with the answer${extra}`;
  const cost = receipt.receipt.cost_micro_usd;
  return `receipt ${receipt.id}  cost ${typeof cost === 'number' ? usd(cost) : '-'}${extra}`;
}

export function registerChat(program: Command): void {
  program
    .command('chat [prompt...]')
    .description('Ask a model: the answer streams to stdout; the receipt id and cost go to stderr (needs an API key: SVC_KEY or --api-key-file)')
    .option('-m, --model <id>', 'the model (default: SVC_MODEL, else the gateway\'s only model)')
    .option('--system <text>', 'a system message before the prompt')
    .option('--max-tokens <n>', 'at most this many output tokens', positiveInt)
    .addHelpText('after', '\nWith no prompt argument, the prompt is read from stdin.\n  echo "Summarize: ..." | svc chat --model llama3:8b')
    .action(async (words: string[], opts: ChatOptions, cmd: Command) => {
      const ctx = context(cmd);
      const client = keyClient(ctx);
      const text = await prompt(words);
      const model = await chooseModel(ctx, opts.model);
      const messages: ChatCompletionInput['messages'] = [...(opts.system ? [{ role: 'system', content: opts.system }] : []), { role: 'user', content: text }];
      // The usage chunk before [DONE] carries the metered token counts, for --json and the receipt line.
      const body: ChatCompletionInput = { model, messages, stream_options: { include_usage: true }, ...(opts.maxTokens !== undefined ? { max_tokens: opts.maxTokens } : {}) };

      const spin = progress(`waiting for ${model}`, { plain: false });
      let result: ChatResult;
      try {
        result = await streamChat(client, body, (t) => (ctx.out.json ? undefined : process.stdout.write(t)), () => spin.stop());
      } catch (err) {
        spin.stop();
        if (err instanceof ApiError && err.status === 404 && err.param === 'model') {
          const ids = await modelIds(ctx.client).catch(() => []);
          throw new CliError(`unknown model "${model}" at ${ctx.url}`, EXIT_FAILURE, ids.length ? `pass --model with one of: ${ids.join(', ')}` : 'the gateway serves no models now');
        }
        throw err;
      }
      spin.stop();
      if (ctx.out.json) ctx.out.result(result, () => '');
      else if (!result.content.endsWith('\n')) process.stdout.write('\n');
      ctx.out.note(receiptLine(result.receipt, result.finish_reason === 'length' ? '  (stopped at the token limit)' : ''));
    });
}
