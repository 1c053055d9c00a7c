//! `mcp-tasks`: the admin CLI for task stores. See `mcp_tasks_cli` for the commands.

fn main() {
    std::process::exit(mcp_tasks_cli::run(std::env::args_os()));
}
