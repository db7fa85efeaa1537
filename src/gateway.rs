//! The state every transport shares: configuration, the schema catalog, the upstreams'
//! resolved policies, and the ids toolgate mints. Holds nothing another replica would need:
//! losing it loses a cache.

use crate::catalog::{Catalog, CompileSettings, ScopeKey};
use crate::config::{Config, ConfigError, Validation};
use crate::pipeline::rules::ToolRules;
use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// One upstream as the rules see it: its name, where it is, and its resolved policy.
pub struct Target {
    pub name: Arc<str>,
    /// The path clients use (`/mcp` or `/<name>/mcp`).
    pub path: String,
    /// Empty for a stdio upstream.
    pub url: String,
    /// The stdio server to launch, when there is no URL.
    pub command: Vec<String>,
    pub validation: Validation,
    rules: HashMap<String, ToolRules>,
}

impl Target {
    fn new(
        name: &str,
        path: String,
        url: String,
        validation: Validation,
        catalog: &Catalog,
    ) -> Result<Target, ConfigError> {
        let mut rules = HashMap::new();
        for (tool, policy) in &validation.tools {
            if let Some(r) = ToolRules::from_policy(policy, catalog)
                .map_err(|e| ConfigError(format!("upstream {name}, tool {tool}: {e}")))?
            {
                rules.insert(tool.clone(), r);
            }
        }
        Ok(Target {
            name: name.into(),
            path,
            url,
            command: Vec::new(),
            validation,
            rules,
        })
    }

    /// Operator rules for a tool beyond its advertised schema, if any.
    pub fn rules(&self, tool: &str) -> Option<&ToolRules> {
        self.rules.get(tool)
    }
}

pub struct Gateway {
    pub config: Config,
    pub catalog: Catalog,
    pub metrics: crate::metrics::Metrics,
    pub targets: Vec<Arc<Target>>,
    /// Keys scope hashes of credentials, so catalogs never hold a token as it came.
    hasher: RandomState,
    /// Ids toolgate mints carry a random per-process prefix, so they cannot collide with a
    /// client's.
    id_prefix: String,
    id_seq: AtomicU64,
}

impl Gateway {
    pub fn new(config: Config) -> Result<Arc<Gateway>, ConfigError> {
        config.check()?;
        let catalog = Catalog::new(
            CompileSettings::from_config(&config.limits, &config.validation),
            config.limits.max_scopes,
        );
        let mut targets = Vec::new();
        if let Some(url) = &config.upstream {
            targets.push(Arc::new(Target::new(
                "default",
                "/mcp".into(),
                url.clone(),
                config.validation.clone(),
                &catalog,
            )?));
        }
        for u in &config.upstreams {
            let v = config.validation.with(&u.validation);
            targets.push(Arc::new(Target::new(
                &u.name,
                format!("/{}/mcp", u.name),
                u.url.clone(),
                v,
                &catalog,
            )?));
        }
        if config.upstream.is_none() && !config.command.is_empty() {
            let mut t = Target::new(
                "default",
                "/mcp".into(),
                String::new(),
                config.validation.clone(),
                &catalog,
            )?;
            t.command = config.command.clone();
            targets.insert(0, Arc::new(t));
        }
        if targets.is_empty() {
            return Err(ConfigError(
                "no upstream: give --upstream URL or [[upstreams]] in the config file".into(),
            ));
        }
        let hasher = RandomState::new();
        let id_prefix = format!("toolgate-{:016x}", hasher.hash_one(std::process::id()));
        Ok(Arc::new(Gateway {
            catalog,
            metrics: Default::default(),
            targets,
            hasher,
            id_prefix,
            id_seq: AtomicU64::new(0),
            config,
        }))
    }

    /// A fresh id for a message toolgate sends or writes on its own behalf.
    pub fn next_id(&self) -> String {
        format!(
            "{}-{}",
            self.id_prefix,
            self.id_seq.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Which catalog a request reads: its session's, or (stateless) its credentials'.
    pub fn scope(
        &self,
        target: &Target,
        session: Option<&[u8]>,
        authorization: Option<&[u8]>,
    ) -> ScopeKey {
        let context = match (session, authorization) {
            (Some(s), _) => self.hasher.hash_one((b's', s)),
            (None, Some(a)) => self.hasher.hash_one((b'a', a)),
            (None, None) => 0,
        };
        ScopeKey {
            upstream: target.name.clone(),
            context,
        }
    }
}
