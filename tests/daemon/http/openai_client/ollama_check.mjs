// Drives octod's Ollama API with the official `ollama` npm client (ollama-js),
// as a user's script would, and prints what the client received as one JSON
// line, or {"error": {"message", "status"}} when it raised an error.
//
//   node ollama_check.mjs HOST MODE MODEL PROMPT NUM_PREDICT
// MODE:
//   generate-stream  /api/generate, raw, streamed: {"pieces": [...], "text", "done_reason", "eval_count", "context"}
//   chat             /api/chat, whole: {"text", "done_reason", "eval_count"}
//   embed            /api/embed with PROMPT split at "|": {"embeddings": [[...]], "prompt_eval_count"}
//   list             /api/tags and /api/show MODEL: {"names": [...], "capabilities": [...], "family"}
//   structured       /api/chat with a JSON Schema as `format` (as withStructuredOutput sends it):
//                    {"text", "done_reason", "parsed"}
// Generations are greedy (temperature 0) with repeat_penalty 1, octo-gen's default.
import { Ollama } from 'ollama';

const [host, mode, model, prompt, numPredict] = process.argv.slice(2);
const client = new Ollama({ host });
const options = { temperature: 0, num_predict: Number(numPredict), repeat_penalty: 1 };

async function run() {
  if (mode === 'generate-stream') {
    const result = { pieces: [], text: '', done_reason: null, eval_count: null, context: null };
    for await (const part of await client.generate({ model, prompt, raw: true, options, stream: true })) {
      if (part.done) {
        result.done_reason = part.done_reason;
        result.eval_count = part.eval_count;
        result.context = part.context;
      } else {
        result.pieces.push(part.response);
      }
      result.text += part.response;
    }
    return result;
  }
  if (mode === 'chat') {
    const reply = await client.chat({ model, messages: [{ role: 'user', content: prompt }], options });
    return { text: reply.message.content, done_reason: reply.done_reason, eval_count: reply.eval_count };
  }
  if (mode === 'embed') {
    const reply = await client.embed({ model, input: prompt.split('|') });
    return { embeddings: reply.embeddings, prompt_eval_count: reply.prompt_eval_count };
  }
  if (mode === 'structured') {
    const format = {
      type: 'object',
      properties: { city: { type: 'string', maxLength: 16 }, population: { type: 'integer', minimum: 0, maximum: 40000000 } },
      required: ['city', 'population'],
    };
    const reply = await client.chat({ model, messages: [{ role: 'user', content: prompt }], format, options, stream: false });
    let parsed = null;
    try { parsed = JSON.parse(reply.message.content); } catch { parsed = null; }
    return { text: reply.message.content, done_reason: reply.done_reason, parsed };
  }
  if (mode === 'list') {
    const tags = await client.list();
    const shown = await client.show({ model });
    return { names: tags.models.map((m) => m.name), capabilities: shown.capabilities, family: shown.details.family };
  }
  throw new Error(`unknown mode ${mode}`);
}

try {
  console.log(JSON.stringify(await run()));
} catch (e) {
  console.log(JSON.stringify({ error: { message: e.message, status: e.status_code ?? null } }));
}
