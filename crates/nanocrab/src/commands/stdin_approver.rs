//! Approvals for `nanocrab agent`: the question on stderr, the answer typed on stdin.

use std::io::BufRead as _;

use async_trait::async_trait;
use nanocrab_policy::{ApprovalAnswer, ApprovalError, ApprovalReply, ApprovalRequest, Approver};
use tokio::io::unix::AsyncFd;

/// Asks whoever is at stdin. The wait is for stdin to become readable, not a blocking read,
/// so when the approval times out nothing is left reading and the next prompt gets the
/// next line.
pub struct StdinApprover;

#[async_trait]
impl Approver for StdinApprover {
    async fn ask(&self, request: &ApprovalRequest) -> Result<ApprovalReply, ApprovalError> {
        // Files and /dev/null cannot be waited on: nobody is there to answer.
        #[allow(unsafe_code)]
        // SAFETY: fd 0 is open for the whole life of the process and `Stdin` never closes
        // it, so it stays the same open file while the `AsyncFd` exists.
        let registered = unsafe { AsyncFd::register(std::io::stdin()) };
        let stdin = registered.map_err(|err| {
            ApprovalError::Unreachable(format!("stdin is not interactive ({err})"))
        })?;
        let choices = if request.session_grant_offered {
            "[y]es once, [a]lways in this session, [n]o"
        } else {
            "[y]es once, [n]o"
        };
        eprintln!(
            "\n  ? {tool} wants to {summary}\n    risk: {risk}; needs: {needs}",
            tool = request.tool,
            summary = request.summary,
            risk = request.risk,
            needs = request
                .missing
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
        );
        loop {
            eprint!("    allow? {choices}: ");
            let mut ready = stdin
                .readable()
                .await
                .map_err(|err| ApprovalError::Unreachable(format!("cannot read stdin ({err})")))?;
            let mut line = String::new();
            let read = std::io::stdin().lock().read_line(&mut line);
            ready.clear_ready();
            match read {
                Ok(0) => {
                    return Err(ApprovalError::Unreachable(
                        "stdin closed before an answer".into(),
                    ));
                }
                Ok(_) => {}
                Err(err) => {
                    return Err(ApprovalError::Unreachable(format!(
                        "cannot read stdin ({err})"
                    )));
                }
            }
            let word = line.trim();
            // An empty answer is the safe one.
            let answer = if word.is_empty() {
                Some(ApprovalAnswer::Deny)
            } else {
                ApprovalAnswer::parse(word)
            };
            if let Some(answer) = answer {
                return Ok(ApprovalReply {
                    answer,
                    by: "cli".into(),
                });
            }
        }
    }
}
