package timer

import "github.com/nekro-go/nekro/plugin"

func init() {
	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "set_timer", Description: "设置定时器",
		Doc: `设置一个定时器，在指定时间触发自身响应；临时定时器主要用于回复后设置短期自我唤醒来观察新消息和反馈
!!!始终记住：定时器的本质功能是允许你自行唤醒你自己作为 LLM 的回复流程, 非必要不得反复自我唤醒!!!

Returns:
    bool: 是否设置成功 (False for a time already past)

Example:
    # 临时定时器（自我唤醒）
    set_timer(chat_key=_ck, trigger_time=int(time.time()) + 60, event_desc="我刚才建议用户重启，需要观察反馈。", temporary=True)
    # 清空临时定时器
    set_timer(chat_key=_ck, trigger_time=-1, event_desc="", temporary=True)
    # 普通定时器（常规提醒）
    set_timer(chat_key=_ck, trigger_time=int(time.time()) + 300, event_desc="提醒吃早餐。context: 用户5分钟前说要吃早餐，让我提醒。", temporary=False)`,
	}, setTimer)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "create_recurring_timer", Description: "创建周期定时任务",
		Doc: `创建一个持久化周期定时任务（cron, 5 段: min hour day month dow）。

Returns:
    str: 新任务的任务ID

Example:
    job_id = create_recurring_timer(_ck, "0 9 * * *", "提醒用户打卡", workday_mode="mon_fri", timezone="Asia/Shanghai", title="打卡")`,
	}, createRecurring)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "list_recurring_timers", Description: "列出周期定时任务",
		Doc: `列出当前频道的周期定时任务（用于 AI 主动管理）。

Returns:
    dict: {"count": n, "jobs": [{"id", "title", "status", "cron_expr", "timezone", "workday_mode", "event_desc", "next_run_at"}]}`,
	}, listRecurring)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Tool, Name: "update_recurring_timer", Description: "更新周期定时任务",
		Doc: `更新当前频道的一个周期定时任务；为空的参数保持不变。

Returns:
    bool: 是否更新成功`,
	}, updateRecurring)

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Behavior, Name: "pause_recurring_timer", Description: "暂停周期定时任务",
		Doc: `暂停当前频道的一个周期定时任务（暂停后不会触发）。

Returns:
    str: what was done`,
	}, func(ctx *plugin.Ctx, a JobArgs) (string, error) { return setPaused(ctx, a, true) })

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Behavior, Name: "resume_recurring_timer", Description: "恢复周期定时任务",
		Doc: `恢复当前频道的一个周期定时任务（恢复后会重新计算下次触发时间）。

Returns:
    str: what was done`,
	}, func(ctx *plugin.Ctx, a JobArgs) (string, error) { return setPaused(ctx, a, false) })

	plugin.MountSandboxMethod(p, plugin.Method{
		Type: plugin.Behavior, Name: "delete_recurring_timer", Description: "删除周期定时任务",
		Doc: `删除当前频道的一个周期定时任务。

Returns:
    str: what was done`,
	}, deleteRecurring)

	p.OnTimer(fire)
	p.OnPromptInject(inject)
	plugin.Register(p)
}
