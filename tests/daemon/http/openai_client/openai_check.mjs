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
// tools: a tool round trip as an agent makes it: a required call to
// get_weather (whole), its result sent back as a tool message, the answer;
// then the same call streamed, its tool_call deltas gathered as the SDK's
// users do. The line is {"call", "finish_reason", "answer", "answer_finish",
// "streamed_call", "streamed_finish"}.
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
  if (mode === 'tools') {
    const tools = [{
      type: 'function',
      function: {
        name: 'get_weather',
        description: 'The weather in a city now',
        parameters: {
          type: 'object',
          properties: { city: { type: 'string', maxLength: 16 }, unit: { enum: ['C', 'F'] } },
          required: ['city', 'unit'],
          additionalProperties: false,
        },
      },
    }];
    const messages = [{ role: 'user', content: prompt }];
    const request = { ...common, temperature: 1, seed: 5, tools, tool_choice: 'required', parallel_tool_calls: false };
    const first = await client.chat.completions.create({ ...request, messages });
    const call = first.choices[0].message.tool_calls[0];
    messages.push(first.choices[0].message);
    messages.push({ role: 'tool', tool_call_id: call.id, content: '{"temperature": 18}' });
    const answer = await client.chat.completions.create({ ...common, messages, tools, tool_choice: 'none' });
    const stream = await client.chat.completions.create({ ...request, messages: messages.slice(0, 1), stream: true });
    const streamed = {};
    let streamedFinish = null;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      if (!choice) continue;
      for (const delta of choice.delta.tool_calls ?? []) {
        const entry = streamed[delta.index] ?? (streamed[delta.index] = { id: '', name: '', arguments: '' });
        if (delta.id) entry.id = delta.id;
        if (delta.function?.name) entry.name += delta.function.name;
        if (delta.function?.arguments) entry.arguments += delta.function.arguments;
      }
      if (choice.finish_reason) streamedFinish = choice.finish_reason;
    }
    return {
      call: { id: call.id, name: call.function.name, arguments: call.function.arguments },
      finish_reason: first.choices[0].finish_reason,
      answer: answer.choices[0].message.content,
      answer_finish: answer.choices[0].finish_reason,
      streamed_call: streamed[0] ?? null,
      streamed_finish: streamedFinish,
    };
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
