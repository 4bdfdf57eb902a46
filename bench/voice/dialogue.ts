// A session's conversation over one API: the request for each step, and the messages the replica
// renders from it (what the ideal model replays), grown by what came back.
//
// - chat: /v1/chat/completions with the whole history, as conversation.ts builds it.
// - responses: /v1/responses with the agent's system prompt as `instructions` and its tools in the
//   Responses API's flat shape. Keyed sessions chain their turns by `previous_response_id` with
//   `store: true` (the replica that produced a response is the only one that holds it); keyless
//   sessions resend their history as input items with `store: false`, as the OpenAI SDK does when
//   the client keeps the conversation.

import { readChatEvent, readResponsesEvent, type EventReader, type Exchange, type ToolCall } from './client.js';
import { answerMessages, MAX_TOKENS, MODEL, openingHistory, requestOf, toolResult, type ChatMessage } from './conversation.js';
import type { GroupPlan, SessionPlan } from './workload.js';

export const APIS = ['chat', 'responses'] as const;
export type Api = (typeof APIS)[number];

export interface DialogueRequest {
  path: string;
  headers: Record<string, string>;
  body: Record<string, unknown>;
  read: EventReader;
}

export interface Dialogue {
  /** What the replica renders for the request `next` just built (the ideal model replays it). */
  readonly messages: readonly ChatMessage[];
  /** The request for the caller's utterance; with null, the follow-up after the tool's result. */
  next(user: string | null): DialogueRequest;
  /** A turn answered from a template, no model call (the orchestrated agent): both go into the history. */
  canned(user: string, answer: string): void;
  /** What came back. `complete`: status 200, no error, the stream's end seen. */
  settle(x: Exchange, complete: boolean, step: number): void;
}

export function dialogueOf(api: Api, session: SessionPlan, group: GroupPlan): Dialogue {
  return api === 'chat' ? chatDialogue(session, group) : responsesDialogue(session, group);
}

function chatDialogue(session: SessionPlan, group: GroupPlan): Dialogue {
  const history: ChatMessage[] = openingHistory(group);
  return {
    messages: history,
    next(user) {
      if (user !== null) history.push({ role: 'user', content: user });
      return { path: '/v1/chat/completions', ...requestOf(session, group, history.slice()), read: readChatEvent };
    },
    canned(user, answer) {
      history.push({ role: 'user', content: user }, { role: 'assistant', content: answer });
    },
    settle(x, complete, step) {
      // Nothing came back to append: the caller repeats the turn's history next time.
      if (!complete) {
        if (step === 0) history.pop();
        return;
      }
      history.push(...answerMessages(x.content, x.toolCall));
    },
  };
}

const callOutput = (call: ToolCall) => ({ type: 'function_call_output', call_id: call.id, output: toolResult(call) });

function responsesDialogue(session: SessionPlan, group: GroupPlan): Dialogue {
  const keyed = session.keyMode !== 'none';
  // The Responses API's function tools are flat: {type, name, description, parameters}.
  const tools = group.tools.map((t) => ({ type: 'function', ...t.function }));
  const rendered: ChatMessage[] = openingHistory(group);
  /** Keyless: the whole conversation as input items. Keyed: this step's input only. */
  const items: unknown[] = [];
  let input: unknown[] = [];
  let previous: string | null = null;
  let call: ToolCall | null = null;

  return {
    messages: rendered,
    canned() {
      throw new Error('canned turns: the orchestrated agent runs over chat completions only');
    },
    next(user) {
      if (user !== null) {
        rendered.push({ role: 'user', content: user });
        input = [{ role: 'user', content: user }];
      } else {
        // The tool's result (keyless: already appended with the call).
        input = keyed && call ? [callOutput(call)] : [];
      }
      if (!keyed) items.push(...input);
      const body: Record<string, unknown> = {
        model: MODEL,
        instructions: group.system,
        tools,
        input: keyed ? input : items.slice(),
        store: keyed,
        stream: true,
        max_output_tokens: MAX_TOKENS,
      };
      if (keyed && previous !== null) body.previous_response_id = previous;
      const headers: Record<string, string> = {};
      if (session.keyMode === 'header') headers['x-session-id'] = session.id;
      if (session.keyMode === 'body') body.prompt_cache_key = session.id;
      return { path: '/v1/responses', headers, body, read: readResponsesEvent };
    },
    settle(x, complete, step) {
      if (!complete || (keyed && x.responseId === null)) {
        if (step === 0) {
          rendered.pop();
          if (!keyed) items.splice(items.length - input.length, input.length);
        } else if (keyed && call) {
          // The tool's result never reached a stored response: the next turn continues without it.
          rendered.pop();
        }
        return;
      }
      call = x.toolCall;
      if (keyed) {
        previous = x.responseId;
        // vLLM carries a stored response's text into the next prompt, not its function call: the
        // call's result (sent next) follows the caller's words directly.
        if (call === null) rendered.push({ role: 'assistant', content: x.content });
        else if (step === 0) rendered.push({ role: 'tool', tool_call_id: call.id, content: toolResult(call) });
        return;
      }
      items.push(...(x.output ?? []));
      if (call) items.push(callOutput(call));
      rendered.push(...answerMessages(x.content, call));
    },
  };
}
