//! An OpenAI-compatible chat endpoint on the local network (llama-server, vLLM, Ollama): the
//! scale-out path for models that outgrow one machine. The only network connection Abhed ever
//! opens, and only to the URL the operator configured; proxy variables are ignored.
//!
//! The turn schema goes as `response_format` (json_schema), which llama-server and vLLM
//! enforce with a grammar; a server that ignores it still has its reply parsed and checked.

use std::sync::mpsc;
use std::time::Duration;

use anyhow::anyhow;
use serde_json::{Value, json};

use super::{Message, Model, ModelError, ModelInfo, Reply, TurnRequest, TurnSchema, Usage};

#[derive(Debug, Clone)]
pub struct OpenAiParams {
    /// `http://host:port` or `http://host:port/v1`.
    pub endpoint: String,
    /// The `model` field of the request; servers with one model ignore it.
    pub model: String,
    /// Read from the environment variable the operator names, never from a file we write.
    pub api_key: Option<String>,
    pub connect_timeout: Duration,
    /// The longest one turn may take.
    pub turn_timeout: Duration,
    pub temperature: f32,
    /// The server's context window, where the operator knows it (llama-server reports its own).
    pub n_ctx: Option<u32>,
}

pub struct OpenAi {
    params: OpenAiParams,
    url: String,
    agent: ureq::Agent,
    schema: Value,
    answer_schema: Value,
    call_schema: Value,
    /// A call of one tool only, per tool (`TurnRequest::only_tool`).
    tool_schemas: Vec<(String, Value)>,
    n_ctx: Option<u32>,
}

fn base(endpoint: &str) -> String {
    let e = endpoint.trim_end_matches('/');
    e.strip_suffix("/v1").unwrap_or(e).to_string()
}

impl OpenAi {
    pub fn new(params: OpenAiParams, schema: &TurnSchema) -> Self {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .proxy(None)
            .timeout_connect(Some(params.connect_timeout))
            .timeout_global(Some(params.turn_timeout))
            .http_status_as_error(false)
            .build()
            .into();
        let root = base(&params.endpoint);
        let url = format!("{root}/v1/chat/completions");
        let mut me = OpenAi {
            n_ctx: params.n_ctx,
            params,
            url,
            agent,
            schema: schema.json_schema().clone(),
            answer_schema: schema.answer_schema().clone(),
            call_schema: schema.call_schema().clone(),
            tool_schemas: schema
                .tools()
                .iter()
                .filter_map(|t| schema.tool_call_schemas(t).map(|(call, _)| (t.clone(), call.clone())))
                .collect(),
        };
        if me.n_ctx.is_none() {
            me.n_ctx = me.server_n_ctx(&root);
        }
        me
    }

    /// llama-server says its context size at `/props`; other servers have no such route.
    fn server_n_ctx(&self, root: &str) -> Option<u32> {
        let mut resp = self.agent.get(format!("{root}/props")).call().ok()?;
        if !resp.status().is_success() {
            return None;
        }
        let v: Value = resp.body_mut().read_json().ok()?;
        v.pointer("/default_generation_settings/n_ctx").and_then(Value::as_u64).map(|n| n as u32)
    }

    fn body(&self, req: &TurnRequest<'_>) -> Value {
        let messages: Vec<Value> =
            req.messages.iter().map(|m| json!({"role": m.role.as_str(), "content": m.content})).collect();
        let schema = match (req.answer_only, req.call_only) {
            (true, _) => &self.answer_schema,
            (false, true) => req
                .only_tool
                .and_then(|t| self.tool_schemas.iter().find(|(name, _)| name == t))
                .map_or(&self.call_schema, |(_, schema)| schema),
            (false, false) => &self.schema,
        };
        let (temperature, seed) = req.decoding(self.params.temperature, 0);
        let mut body = json!({
            "model": self.params.model,
            "messages": messages,
            "max_tokens": req.max_tokens,
            "temperature": temperature,
            "stream": false,
            "cache_prompt": true,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "turn", "strict": true, "schema": schema},
            },
        });
        // A turn asked for again: a seed per try, which llama-server honours.
        if req.vary > 0 {
            body["seed"] = json!(seed);
        }
        body
    }

    fn unreachable(&self, e: &ureq::Error) -> ModelError {
        let why = match e {
            ureq::Error::Timeout(_) => format!(
                "it did not answer within the time allowed (connect {} s, turn {} s)",
                self.params.connect_timeout.as_secs(),
                self.params.turn_timeout.as_secs()
            ),
            ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
                "the connection was refused: no server is listening there".to_string()
            }
            other => other.to_string(),
        };
        ModelError::Endpoint(format!(
            "cannot use the model endpoint {}: {why}. Check that the server is running and the URL (--endpoint) is right; raise model.turn_timeout_s for slow models.",
            self.url
        ))
    }
}

impl Model for OpenAi {
    fn describe(&self) -> ModelInfo {
        ModelInfo {
            adapter: "openai".into(),
            name: self.params.model.clone(),
            location: self.url.clone(),
            n_ctx: self.n_ctx,
            protocol: super::JSON_TURN.into(),
            ..ModelInfo::default()
        }
    }

    fn n_ctx(&self) -> Option<u32> {
        self.n_ctx
    }

    fn count_tokens(&self, _messages: &[Message]) -> Result<Option<u32>, ModelError> {
        Ok(None)
    }

    // One after another: the endpoint serves one request of ours at a time.
    fn run_parallel<'s>(&mut self, jobs: Vec<super::Job<'s>>) -> Result<(), ModelError> {
        super::run_in_turn(self, jobs)
    }

    fn complete(&mut self, req: &TurnRequest<'_>) -> Result<Reply, ModelError> {
        let body = self.body(req);
        let agent = self.agent.clone();
        let url = self.url.clone();
        let key = self.params.api_key.clone();
        let started = std::time::Instant::now();
        // The request runs on its own thread so that Ctrl-C and the deadline are noticed
        // while a slow server thinks; an abandoned request ends at its own timeout.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut r = agent.post(&url).header("Content-Type", "application/json");
            if let Some(k) = key {
                r = r.header("Authorization", &format!("Bearer {k}"));
            }
            let result = r.send_json(&body).and_then(|mut resp| {
                let status = resp.status().as_u16();
                let text = resp.body_mut().read_to_string()?;
                Ok((status, text))
            });
            let _ = tx.send(result);
        });
        let result = loop {
            if req.should_stop() {
                return Err(ModelError::Cancelled);
            }
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(r) => break r,
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(ModelError::Fault(anyhow!("the request thread ended without a result")));
                }
            }
        };
        let (status, text) = result.map_err(|e| self.unreachable(&e))?;
        let v: Value = serde_json::from_str(&text).map_err(|_| {
            ModelError::Endpoint(format!(
                "the model endpoint {} answered HTTP {status} with something that is not JSON: {}",
                self.url,
                text.chars().take(300).collect::<String>()
            ))
        })?;
        if !(200..300).contains(&status) {
            let msg = v.pointer("/error/message").and_then(Value::as_str).unwrap_or(&text);
            if msg.contains("context") && (msg.contains("exceed") || msg.contains("too long") || msg.contains("length"))
            {
                return Err(ModelError::ContextFull {
                    needed: 0,
                    prompt: 0,
                    reply: req.max_tokens,
                    n_ctx: self.n_ctx.unwrap_or(0),
                });
            }
            return Err(ModelError::Endpoint(format!("the model endpoint {} answered HTTP {status}: {msg}", self.url)));
        }
        let content = v.pointer("/choices/0/message/content").and_then(Value::as_str).ok_or_else(|| {
            ModelError::Endpoint(format!("the model endpoint {} answered without choices[0].message.content", self.url))
        })?;
        let n = |p: &str| v.pointer(p).and_then(Value::as_u64).unwrap_or(0) as u32;
        let prompt = n("/usage/prompt_tokens");
        let cached = n("/usage/prompt_tokens_details/cached_tokens");
        let generated = n("/usage/completion_tokens");
        let ms = |p: &str| v.pointer(p).and_then(Value::as_f64).map(|f| f as u64);
        let total_ms = started.elapsed().as_millis() as u64;
        let usage = Usage {
            prompt_tokens: prompt,
            cached_tokens: cached,
            evaluated_tokens: prompt.saturating_sub(cached),
            generated_tokens: generated,
            prompt_ms: ms("/timings/prompt_ms").unwrap_or(0),
            generate_ms: ms("/timings/predicted_ms").unwrap_or(total_ms),
            grammar_resamples: 0,
        };
        let cut_off = v.pointer("/choices/0/finish_reason").and_then(Value::as_str) == Some("length");
        Ok(Reply { text: content.to_string(), usage, cut_off })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_forms() {
        assert_eq!(base("http://127.0.0.1:8080/v1/"), "http://127.0.0.1:8080");
        assert_eq!(base("http://127.0.0.1:8080"), "http://127.0.0.1:8080");
    }
}
