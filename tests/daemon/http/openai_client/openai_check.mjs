// Drives octod's HTTP API with the official `openai` npm client, as a user's
// script would, and prints what the client received as one JSON line:
//   {"pieces": [text of each streamed chunk], "text", "finish_reason", "usage"}
// or, when the client raised an error: {"error": {"status", "message", "code", "param", "type"}}.
//
//   node openai_check.mjs BASE_URL API_KEY MODE MODEL PROMPT MAX_TOKENS
// MODE: chat-stream | chat | completion-stream | completion, or
// embeddings | embeddings-float: PROMPT holds the inputs separated by "|",
// MAX_TOKENS is unused, and the line is {"embeddings": [[...], ...], "usage"}
// (the SDK asks for base64 unless told "float", and decodes it).
// json-schema: a chat whose reply is held to a person schema (response_format
// json_schema, strict), and the line is {"text", "finish_reason", "parsed"}.
// Chat requests render with the chatml template (a field the SDK passes on
// as it is) and ask for logprobs; all are greedy (temperature 0).
import OpenAI from 'openai';

const [baseURL, apiKey, mode, model, prompt, maxTokens] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60000 });
const common = { model, temperature: 0, max_tokens: Number(maxTokens) };

async function run() {
  if (mode === 'embeddings' || mode === 'embeddings-float') {
    const request = { model, input: prompt.split('|') };
    if (mode === 'embeddings-float') request.encoding_format = 'float';
    const reply = await client.embeddings.create(request);
    return { embeddings: reply.data.map((entry) => Array.from(entry.embedding)), usage: reply.usage };
  }
  if (mode === 'json-schema') {
    const schema = {
      type: 'object',
      properties: {
        name: { type: 'string', maxLength: 12 },
        age: { type: 'integer', minimum: 0, maximum: 120 },
        pets: { type: 'array', items: { enum: ['cat', 'dog'] }, maxItems: 3 },
      },
      required: ['name', 'age', 'pets'],
      additionalProperties: false,
    };
    const reply = await client.chat.completions.create({
      ...common,
      messages: [{ role: 'user', content: prompt }],
      response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema } },
    });
    const text = reply.choices[0].message.content;
    let parsed = null;
    try { parsed = JSON.parse(text); } catch { parsed = null; }
    return { text, finish_reason: reply.choices[0].finish_reason, parsed };
  }
  const result = { pieces: [], text: '', finish_reason: null, usage: null };
  if (mode === 'chat-stream' || mode === 'chat') {
    const request = {
      ...common,
      messages: [{ role: 'user', content: prompt }],
      chat_template: 'chatml',
      logprobs: true,
    };
    if (mode === 'chat') {
      const reply = await client.chat.completions.create(request);
      result.text = reply.choices[0].message.content;
      result.pieces = reply.choices[0].logprobs.content.map((entry) => entry.token);
      result.finish_reason = reply.choices[0].finish_reason;
      result.usage = reply.usage;
      return result;
    }
    const stream = await client.chat.completions.create({
      ...request, stream: true, stream_options: { include_usage: true },
    });
    for await (const chunk of stream) {
      if (chunk.usage) result.usage = chunk.usage;
      const choice = chunk.choices[0];
      if (!choice) continue;
      if (choice.logprobs) result.pieces.push(...choice.logprobs.content.map((entry) => entry.token));
      if (choice.delta.content) result.text += choice.delta.content;
      if (choice.finish_reason) result.finish_reason = choice.finish_reason;
    }
    return result;
  }
  if (mode === 'completion') {
    const reply = await client.completions.create({ ...common, prompt, logprobs: 0 });
    result.text = reply.choices[0].text;
    result.pieces = reply.choices[0].logprobs.tokens;
    result.finish_reason = reply.choices[0].finish_reason;
    result.usage = reply.usage;
    return result;
  }
  if (mode === 'completion-stream') {
    const stream = await client.completions.create({
      ...common, prompt, stream: true, stream_options: { include_usage: true },
    });
    for await (const chunk of stream) {
      if (chunk.usage) result.usage = chunk.usage;
      const choice = chunk.choices[0];
      if (!choice) continue;
      if (choice.finish_reason) {
        result.finish_reason = choice.finish_reason;
      } else {
        result.pieces.push(choice.text);  // one chunk per token, "" for a token that ends no character
      }
      result.text += choice.text;
    }
    return result;
  }
  throw new Error(`unknown mode ${mode}`);
}

try {
  console.log(JSON.stringify(await run()));
} catch (e) {
  console.log(JSON.stringify({
    error: { status: e.status ?? null, message: e.message, code: e.code ?? null, param: e.param ?? null, type: e.type ?? null },
  }));
}
