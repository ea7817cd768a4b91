package agent

// Personas and languages: the character a chat's turns speak as, and the
// language of the prompt's fixed parts and of the notices users read.

import (
	"context"
	"fmt"
	"strings"

	"github.com/nekro-go/nekro/plugin"
)

// Persona is who the assistant of a chat is: the operator's text (a
// preset, internal/presets), trusted, put into the system prompt.
type Persona struct {
	Name    string
	Content string
	// Lang is the language of the prompt's fixed parts and of the notices
	// the chat's users read: LangEnglish (also when empty) or LangChinese.
	Lang string
}

// Languages of the prompt's fixed parts.
const (
	LangEnglish = "en"
	LangChinese = "zh"
)

// Langs are the languages a persona may choose.
var Langs = []string{LangEnglish, LangChinese}

// notices are what the chat's users read, by language, when a turn
// could not answer them (chat.TurnEnd.Notice): short, with nothing of the
// host's internals (those go to the turn's record, to a system note the
// model and the operator read, and to the log).
var notices = map[string]string{
	LangEnglish: "Sorry, I could not answer this time. Please try again later.",
	LangChinese: "抱歉，这次没能回答，请稍后再试。",
}

// langOf returns lang when nekro speaks it, else English.
func langOf(lang string) string {
	if _, ok := notices[lang]; ok {
		return lang
	}
	return LangEnglish
}

// persona returns chatKey's persona, or none (English) when there is no
// source or it fails.
func (a *Agent) persona(ctx context.Context, chatKey string) Persona {
	if a.cfg.Persona == nil {
		return Persona{}
	}
	p, err := a.cfg.Persona(ctx, chatKey)
	if err != nil {
		a.log.Warn("the chat's persona cannot be read; answering without one", "chat", chatKey, "err", err)
		return Persona{}
	}
	return p
}

// personaBlock is the persona's part of the system prompt.
func personaBlock(p Persona) string {
	if strings.TrimSpace(p.Content) == "" {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n")
	if p.Lang == LangChinese {
		b.WriteString("你的人设如下。给聊天发送的每条消息都要以这个角色的身份和语气来写（代码本身不受影响）。\n")
	} else {
		b.WriteString("Your persona follows. Write every message you send to the chat as this character, in its voice (the code itself is unaffected).\n")
	}
	fmt.Fprintf(&b, "<persona name=%q>\n%s\n</persona>\n", plugin.EscapePromptTags(p.Name), strings.TrimSpace(p.Content))
	return b.String()
}

// runtimeContractZH is runtimeContract in Chinese.
const runtimeContractZH = `你是一个聊天的助手。你只能通过编写 Python 代码来行动：你的每次回复都必须是且仅是一个放在一个代码块（` + "```python ... ```" + `）中的 Python 3 脚本，不要有其他文字。宿主在沙箱中运行该脚本，只有在需要你注意时才会告诉你发生了什么。

沙箱的工作方式：
- 脚本的工作目录是 /app。./shared（/app/shared）可读写，在本聊天的多次运行之间保留；./uploads（/app/uploads）只读，存放用户发来的文件和你发出的文件。
- 没有网络访问。PACKAGES
- 下面 <plugins> 中列出的函数已经导入；像普通（阻塞）函数一样调用它们。它们在宿主上运行。
- 变量 _ck 是本聊天的 key。用 send_msg_text(_ck, "...") 和用户交流，用 send_msg_file(_ck, "/app/shared/name.png") 发送 ./shared 或 ./uploads 中的文件。print 的内容不会发给用户。你不能写入其他聊天：不同的聊天 key 会被拒绝。
- 标有 [AGENT METHOD - STOP AFTER CALL] 的方法一返回就结束本次运行：之后的代码不会执行。把它放在最后调用；它的结果会返回给你，然后你再写下一个脚本。
- 不是代码的回复（没有代码块，也不是合法的 Python）会原样作为你的消息发到聊天中，且不运行任何东西；代码块之外的文字永远不会被发送。优先在代码中使用 send_msg_text。
- 如果脚本失败，你会得到它的输出（含 traceback），可以回复一个修正后的脚本。不要用包住一切的 try/except 掩盖错误。
- 某些方法的结果会以 SYSTEM 消息出现在聊天记录中。
`
