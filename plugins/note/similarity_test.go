package note

import (
	"math"
	"testing"
)

// TestTitleSimilarityMatchesDifflib checks titleSimilarity against the
// values Python's difflib.SequenceMatcher gave for the same titles (the
// long ones go through its autojunk heuristic), so titles are
// de-duplicated as in the reference.
func TestTitleSimilarityMatchesDifflib(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want float64
	}{
		{"手臂受伤", "手臂受伤了", 0.8888888888888888},
		{"心情愉悦", "心情不错", 0.5},
		{"xxx的财务状况", "正在维护xxx的财务状况", 0.8},
		{"用户邮箱", "用户的电子邮箱", 0.7272727272727273},
		{"「小明」的生日", " 小明的生日 ", 1.0},
		{"‘小明’的生日", "小明的生日", 1.0},
		{"abc", "", 0.0},
		{"", "", 1.0},
		{"Alice's email", "Alices email address", 0.75},
		{"weather", "whether", 0.8571428571428571},
		{"note 1", "note 2", 0.8333333333333334},
		{"PtYgjmUh", "PtY鸟jmUh", 0.875},
		{"l31iEl2h", "l31pEl2hhYgCfrL1s", 0.56},
		{"pNxnyVmihA狗2O76UMFxFkM狗R5Kjp鱼1vRt猫1fjORS", "pNxn8VmihA狗2O76UMl5hkMXR5Kjp鱼cvRt猫1fj狗RSvo狗hB", 0.7764705882352941},
		{"KqFYY狗kv5ZJr3J1TWDtkwtDDb猫xHKas1VOq鱼g6YY", "KqFZy狗gu5ZJr3J1TWDtkwtDDbZxHAan1VOq鱼g6RY", 0.8},
		{"tmUdjAWtGSU8po猫799NksnRH9ucAUsdMlHUvTC鸟QCyEZDz狗TddJ8HyS5SUkCnD8zRA9a9SkpXz9w3QlY7Zkuvqdt7s8Stqcbnr3yBdGBL鸟EPH1qhT61鸟qt鱼c", "tmUdjAWtGSU8po猫799NksntH9鱼cAUsdhlHUyTC鸟QChEZDz狗TddJ8HyS5iJkCsD8z9A9a鱼Sk5Xz9w3鸟PY7Zkuvqdt7F8Stqcbndfa9dGBL鸟EPH1qhTn1鸟qtHcz5r1pY4O", 0.8064516129032258},
		{"jE2jBMptUsGr7CmY猫uCu3鱼ZR1zTOlUcR64cXQL鱼ioDnkHIfxIq2HZt鱼狗PlJhx2jIclHkCiHp6bR1IqfEouHgxzNNAL5鸟wIScGebc鸟y鱼8F5n3狗Y鸟NBDRzrZSg", "5q2jBLpuUsWr7CmY猫uCu3鱼ZT1zTNlUcz64u8QL鱼ioDakHIHxIq2HZt鱼GPlJhx2jIclHkCiQp6bR1KqfEjuH鸟x鸟NNFL5鸟wIScGebc鸟y鱼8F5n3狗Y鸟WeDRzrZSgalHlsZfY", 0.7983870967741935},
		{"cMMDktXP狗tKsf鱼2鸟r鸟cDkdfrUnW5gcF猫Ha6i鸟li8GjHEAD6狗Wj9KfzjsQGMrb9h猫ImB猫LK777pzNk8cL6j鸟5IXAAjlsHUq鱼JoUD狗猫Ydua猫5ZMs1SWOpQaPRYpzbLGViYXjU2JgJngKtFI3鱼OyV2dZAkg05rK猫gqv81RKMGHZEM9YpvujA鸟狗C5Q52ryFlwRlOEVHzc0X0AWIRh狗JUq鸟BlIFXZ53Ncqe28猫ajY75", "fMaDktXF狗tKsf鱼N鸟r鸟cD16frUoWLgcF猫Ma6i鸟lt8GjHEAD6狗WcYKfzjs7HGyb9h猫ImB猫LK777pzNj8czJj鸟5IXAAjlsH1q2JoUDy猫Ydua猫5ZMs1SWOpQaMRYpFbLCVAYXjU2JgJGgKtFE3鱼OyV2dZAkg05rK狗gqv81RKMeHZEM1YpvujA鸟eC0Q5RryFlwLlOEVHzc0X0FWIRa狗JUq鸟BnIFXZ53Ncqe28猫a狗Y7x", 0.5826086956521739},
		{"sYgBds1ghxY5OokvQyx7eNWVQ4vnakJkS1pAWTN3lg8zV5yPU8d0FZfWe7ihGyiRUIQfHOJMaidDn87XG3狗q狗xbMtEPO6Uk鱼zYuF0ie9Pu2njHkAm1狗5wDr16EpLLJIVGHz4FxFEtKyPiYGF鸟Dm7ena8D5VfLDpgyyjV鱼w5HanSBeVRsfAGeAbP0VxNjAe狗9i0mYtluYI0KN1gNT11cUzYZAa3u2olZU6uqbgs", "sYgBdw1ghxy5OOkvQnx7eNXVQ4vnakPTS1pAWTN3lK8鸟V58PU8d0FZfWe7ihGyitUIQfHOJMaidDnz1XG3狗q狗xbMtsPq63k鱼zYuF0i89Pu2nFHkA鸟1E5wDr猫6EpfLJIVG4z4ZxFEtKyP6YGF鸟Dm7ena8DXVfLZagyyju鱼wNHXneBeVRsfAGeAbP0VxNjVe狗9猫0mYtluYI0KN1lNw11cUzY6Aa3u2olZU6uqbgsffqkO鱼kg", 0.7307692307692307},
		{"鸟Wrdioyq猫KvCiSGuPJ6sG鸟9AH鸟EOVezxZuJPWvHogU5nGYVHWVsUQk4DwgLGNOaeCtL31鱼Ugq猫DfcgaTMnTC0MrAU8urbFt5misIZHbhS4狗FvafhdZxEuhnbzs0z鸟1w鱼NiMg9aW37k5wCnHDepQHgI3HLBk鸟bvHEzuPyXQEW88ad3DNBYjvsedonuSsddfrfifiUziXnFAAoeelK9mqmALOR2HcSGKgVP鸟8Kd0d3mS8gBlKv3azKgaS猫m猫x狗S鱼HuKBD狗vok猫nPTmZYl2dVAMH2鸟vWD6qeSPt5Pv74GDqQ7E鸟", "鸟Wrdiohq鱼KvCiSGuPJ6sG鸟9AH鸟EOTezxZuJPWvHogU5nGYVHWVHSQk猫HwgLGNO鱼eCtL31鱼Ugc猫DfcXaMZnBCnMrAU8urDFt5misIJHbhSJ狗67afhdZxEu1nbzs0z11t鱼eiMgyaW3yk5wGnHDepQHgI3HLBsCbvHE3uPyXQEx88ad3DNBYjvs1donuSsddfrfifiUziXbCAAoWelG9cRmALjRGHcSGKMZP鸟8Kd0d3p98gBLKv3azAgaS猫m猫x狗S鱼HuCBD狗vok猫nzTVZZl2dVAMH6鸟vWD6qeSPt5Pv743DqQ7E鸟qi", 0.6910299003322259},
		{"y8CsT07Lq8TDIWG2x9aJTFMP9猫2kUtMXhkPrSbbAjLGmsDx5StAZvlMz狗Bk4opH1Dr8狗h97s猫F狗vauP7狗L7V21jxUdcfQm鱼9猫seB1qRmUR8AK3R2GgLLT狗ZQ鸟I鸟SA狗pQyOMqlfZZgZMnafy8h鸟WskBf6wmxe1mbVrNHMx1eOc3g狗fp1Z5ibXt80nk8Btb2abplBpq8cJF5xgUskL狗6GgebhbkXNNv猫hOV48vsoUu19X5IQLJhQbtN2FWXWD5KaPHI2ufKssJ狗Sk猫WzDNhY7AGbX6lTiDYHP9鸟zyBylxLUTZt", "y8OsT0sLq8TXIWG2x9awTFFPd猫dk9CMX猫kPrSbbCj7WmsDx5c5AZv4Mz狗Bk4oYHXDr8狗h97V猫FmvauP7eL7V21WxUdcfzm鱼9猫se71qRmeR8AK3R2GELLT狗ZQ鸟I4SA狗pQyOqVlBZZgZMnafy8h鸟WskBf6zmxe1mbVrtHMxReOcsg狗fe1ZdibXG80nk8Bobun狗plBpq8cJF鸟xgUskL狗6GgebhbkXJNv猫hOs48vmxUx19V5IQLJhQbtD2VWXWD5KaPHI2ufKsHJ狗Jk猫WzDNhY7AGbX6lTihYeP9鸟O猫BylxLUTZtI1", 0.6877076411960132},
	} {
		if got := titleSimilarity(c.a, c.b); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("titleSimilarity(%q, %q) = %v, difflib says %v", c.a, c.b, got, c.want)
		}
	}
}
