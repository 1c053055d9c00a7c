// mcp-tasks web view: progressive behaviour only; every page works without this script.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  // "Select all" selects every task of this page that an action can change.
  for (const all of document.querySelectorAll("input.select-all")) {
    all.addEventListener("change", () => {
      for (const box of document.querySelectorAll('#tasks tbody input[name="id"]')) box.checked = all.checked;
    });
  }
  // Buttons that change tasks ask first.
  for (const button of document.querySelectorAll("button[data-confirm]")) {
    button.addEventListener("click", (event) => {
      if (!window.confirm(button.dataset.confirm)) event.preventDefault();
    });
  }
});
